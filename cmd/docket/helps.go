package main

// helps are docket's commands, in the order its usage lists them.
var helps = []cmdHelp{
	{"migrate", "[--dry-run]", "apply River's and docket's migrations, then docket's definitions (idempotent)",
		"Brings the database to the schema this build knows: River's migration line into schema docket first, then " +
			"docket's own migrations, then docket's definitions (its functions, triggers, views and privileges) in one " +
			"transaction, when they differ from the ones the database has or a migration was applied. It is idempotent " +
			"and safe to run from several processes at once. --dry-run lists the migrations and definitions it would " +
			"apply and changes nothing; under a migration that rebuilds a table it says how large the table is, since " +
			"every read and write of it waits for that migration. See also migrate down and migrate sql."},
	{"migrate down", "--to N [--dry-run]", "roll docket's migrations back to version N",
		"Drops docket's definitions, then rolls docket's own migrations back, newest first, until the database is at " +
			"version N (0 removes every docket table; River's tables stay); the next migrate, of this build or an older " +
			"one, applies its definitions. --dry-run lists what it would drop and roll back and changes nothing."},
	{"migrate sql", "[--down]", "print the SQL of every migration and of the definitions, River's first",
		"Prints the SQL of every migration this build knows, in the order migrate applies them: River's, then " +
			"docket's, each headed by a comment naming it and wrapped in its own transaction, with the statements that " +
			"record it as applied, and last docket's definitions in one transaction, recorded as migrate records them, " +
			"so that docket status and docket migrate agree afterwards. For teams whose own migration tool runs the " +
			"schema changes. --down prints the rollbacks instead, in the reverse order. Needs no database."},
	{"status", "[--check] [-o json]", "schema versions and definitions, docket's group roles, broken schedules, row counts per table",
		"Says at which version docket's and River's schemas are against this build, whether the database's " +
			"definitions are this build's, which of docket's group roles exist, which schedules the sweep could not " +
			"plan and why (those the login may see: an update or a resume mends one), and how many rows each docket " +
			"table the login may read holds. --check prints only the versions and definitions and exits 3 when a migration is pending, the " +
			"definitions differ from this build's, or the database was never migrated, naming them, 0 when none " +
			"is, 1 when the database cannot be read."},
	{"version", "[-o json]", "build, schema and River versions",
		"Prints this build's version, the docket schema version and fingerprint it migrates to, and River's. Needs no " +
			"database."},
	{"project create", "NAME", "create an active project", "Creates project NAME, active, recorded as made by --as."},
	{"project list", "[-o json]", "list projects", "Lists every project with its status, by name."},
	{"project archive", "NAME", "archive a project", "Moves project NAME to archived: it takes no new work."},
	{"project activate", "NAME", "make a project active again", "Moves project NAME back to active."},
	{"project retire", "NAME", "retire a project for good", "Moves archived project NAME to retired, for good."},
	{"grant", "PRINCIPAL PROJECT CAPABILITY", "grant a capability on a project",
		"Grants CAPABILITY (e.g. job.create) on PROJECT to PRINCIPAL (e.g. svc:billing), recorded as given by --as. " +
			"grant list PROJECT lists them."},
	{"revoke", "PRINCIPAL PROJECT CAPABILITY", "revoke it", "Revokes CAPABILITY on PROJECT from PRINCIPAL."},
	{"grant list", "PROJECT [-o json]", "list the grants on a project",
		"Lists the grants on PROJECT: who holds which capability, given by whom, when."},
	{"actor bind", "ROLE PRINCIPAL", "let a login role act as a principal (or kind:*)",
		"Lets Postgres login role ROLE act as PRINCIPAL, or as every principal of a kind with kind:* (e.g. user:*)."},
	{"actor unbind", "ROLE PRINCIPAL", "no longer", "Removes the binding of login role ROLE to PRINCIPAL."},
	{"actor list", "[ROLE] [-o json]", "the bindings of a login role, or all of them",
		"Lists the principals login role ROLE may act as, or every binding."},
	{"job list", "PROJECT | --cell NAME=URL... [PROJECT...] [--state S] [--kind K] [--queue Q] [--unrunnable] [--limit N] [-o json]", "list a project's jobs, newest first",
		"Lists the jobs of PROJECT you may see, newest first, filtered by state, kind and queue; with --unrunnable, only " +
			"those pinned to handler revisions no deployment runs, which no worker will claim. With --cell NAME=URL, " +
			"repeated, it lists the jobs of the PROJECTs named, or of every project of every cell, each row naming " +
			"its cell; a cell that does not answer is named after the others' rows, and the command fails."},
	{"job census", "PROJECT | --cell NAME=URL... [PROJECT...] [--per-state N] [-o json]", "a project's jobs counted by queue and state",
		"Counts the jobs of PROJECT you may see by queue and state, as the console's first page does, at most " +
			"--per-state of each state, and names the states that reached the bound. A state with fewer jobs is " +
			"read to the end of the project's jobs. With --cell NAME=URL, repeated, it counts the PROJECTs named, or " +
			"every project of every cell, a table each naming its cell."},
	{"job show", "ID [-o json]", "a job, its history, and whether the history verifies",
		"Shows job ID, its requested output and, once it succeeded, what its completion record says the worker " +
			"produced and used; its history of transitions, and whether the history's hash chain verifies; exits 1 " +
			"when it does not."},
	{"job cancel", "ID | --project P [--state queued] [--kind K] [--queue Q] [--yes] [--reason TEXT]",
		"cancel a queued, claimed, uncertain or exhausted job, or a project's queued jobs in bulk",
		"Cancels job ID, keeping --reason as its diagnostic. With --project instead of ID, cancels every queued job " +
			"of project P matching --kind, --queue, --since and --until: without --yes it prints how many it would " +
			"cancel and changes nothing. Needs job.cancel."},
	{"job retry", "ID | --project P [--state S] [--kind K] [--queue Q] [--yes]",
		"enqueue a finished job again as a new job, or a project's finished jobs in bulk",
		"Retries job ID, finished failed, dead or cancelled: a new job of the same kind, payload, queue and project " +
			"is queued, naming ID as the job it retries (job show lists both directions); job ID stays as it " +
			"finished. With --project instead of ID, retries every such job of project P matching --state, --kind, " +
			"--queue, --since and --until that no job retries yet: without --yes it prints how many it would retry " +
			"and changes nothing. Jobs of lanes and cases are their owners' to run again. Needs job.retry."},
	{"job reconcile", "ID succeeded|failed|queued [--note TEXT] [--result JSON]", "settle an uncertain job",
		"Settles uncertain job ID after finding out what became of its run: succeeded (with --result), failed, or " +
			"queued to run again."},
	{"job resume", "ID [--effects N] [--money N]", "queue an exhausted job again, raising its ceilings",
		"Resumes exhausted job ID: raises its budget's ceilings to --effects and --money (minor units; 0 keeps a " +
			"ceiling) and queues it again, due now; a job its project's quota stopped resumes as it was. The raise " +
			"is recorded in the job's history; needs budget.manage."},
	{"job pin", "ID[,ID...] REVISION... | --unpin ID[,ID...]", "pin queued jobs to the handler revisions they may run under",
		"Pins the queued jobs ID, comma-separated, to the handler revisions REVISION (up to 8): only a worker running " +
			"one of them for the job's kind claims it, and none while no deployment runs one (see job list " +
			"--unrunnable). --unpin lets any revision run them again. Prints each job's pin now; needs job.pin."},
	{"job sweep", "[--limit N]", "move expired leases on (queued, dead or uncertain)",
		"Moves the jobs whose lease expired on, as a worker's sweep does: to queued, dead or uncertain."},
	{"queue list", "PROJECT [-o json]", "a project's queues: those ever paused, and those with queued jobs",
		"Lists the queues of PROJECT: each queue ever paused, paused or running, and each other queue with a job " +
			"queued now, by name."},
	{"queue show", "PROJECT QUEUE [-o json]", "a queue: paused or running, and who paused and resumed it when",
		"Shows queue QUEUE of PROJECT: whether it is paused, by whom, since when and why, and its history of pauses " +
			"and resumes."},
	{"queue pause", "PROJECT QUEUE [--reason TEXT]", "pause a queue: no claim takes its jobs, which stay queued",
		"Pauses queue QUEUE of PROJECT: from now on no worker or claim takes its jobs, which stay queued; jobs " +
			"claimed before run on. Pausing a paused queue changes nothing. Needs queue.pause."},
	{"queue resume", "PROJECT QUEUE [--reason TEXT]", "resume a paused queue: its jobs are claimed again",
		"Resumes queue QUEUE of PROJECT: its due jobs are claimed again and its workers woken. Resuming a running " +
			"queue changes nothing. Needs queue.pause."},
	{"lane list", "PROJECT [--quorum Q] [--state S] [--review R] [--limit N] [--after ID] [-o json]",
		"list the lanes of a project you may see, oldest first",
		"Lists the lanes of PROJECT you may see, oldest first; --after pages on from the last id of the previous page."},
	{"lane show", "ID [-o json]", "a lane, its history and its jobs", "Shows lane ID, its history and its first jobs."},
	{"case list", "PROJECT [--status S] [--limit N] [--after ID] [-o json]",
		"list the cases of a project you may see, oldest first",
		"Lists the cases of PROJECT you may see, oldest first; --after pages on from the last id of the previous page."},
	{"case show", "ID [-o json]", "a case, its keys, obligations and history",
		"Shows case ID with its keys, obligations and history. Its state is the application's and is not printed."},
	{"wait list", "PROJECT [--case ID] [--limit N] [-o json]", "waiting waits you may see, soonest deadline first",
		"Lists the waiting waits of PROJECT you may see, soonest deadline first, or with --case every wait of that " +
			"case whatever its status."},
	{"dead-letter list", "PROJECT [--limit N] [-o json]", "messages no wait will claim, newest first (no payloads)",
		"Lists the messages of PROJECT no wait will claim, newest first: who sent each, its keys and why. Never its " +
			"payload, which is the sender's."},
	{"schedule list", "PROJECT [--limit N] [--after NAME] [-o json]", "list the schedules of a project you may see, by name",
		"Lists the schedules of PROJECT you may see, by name, with their next due instant."},
	{"schedule preview", "ID | CRON ZONE [--count N] [--from T] [-o json]", "the next occurrences: local time, fold, UTC instant",
		"Shows the next occurrences of schedule ID, or of a cron expression in a time zone (no database needed): " +
			"the local time, its fold (1 for the second of a repeated hour) and the UTC instant."},
	{"task list", "PROJECT [--mine] [--limit N] [-o json]", "the tasks you may take now and those you hold",
		"Lists the tasks of PROJECT you may take now and those you hold, soonest deadline first; --mine only those " +
			"you hold."},
	{"task show", "ID [-o json]", "a task, who may not answer it, its claim, decision and history",
		"Shows task ID: what is to be decided, who may take it and who may not answer it (four eyes), its claim, " +
			"decision and history."},
	{"plan list", "PROJECT [--limit N] [--before ID] [-o json]", "list the runs of a project you may see, newest first",
		"Lists the runs of plans of PROJECT you may see, newest first, as the console does; --before pages on from " +
			"the last id of the previous page."},
	{"plan show", "RUN [-o json]", "a run of a plan: status, budget, graph, versions",
		"Shows run RUN of a plan: its status, budget, trust and failure, its plan's graph with each step's state, " +
			"arguments' sources and compensation, and its plan's versions."},
	{"batch list", "PROJECT [--limit N] [--after NAME] [-o json]", "list the batches of a project you may see, by name",
		"Lists the batches of PROJECT you may see, by name, each with its census, as the console does; --after pages " +
			"on from the last name of the previous page."},
	{"batch show", "ID [--limit N] [--after KEY] [-o json]", "a batch: plan, source, census, items needing attention",
		"Shows batch ID: its plan, source, cursor and census, and its items failed, quarantined or in flight, oldest " +
			"key first; --after pages on from the last key of the previous page."},
	{"serve", "--project P[,P...] [--addr HOST:PORT] [--auth-header H] [--dev-principal P] [--cell NAME=URL...]",
		"a web worklist and console of those projects for people an auth proxy signs in",
		"Serves, at --addr, a worklist of the projects' tasks and, under /console/, a console of their jobs " +
			"(by state and queue, each with its verified history; uncertain jobs to reconcile or cancel), cases, " +
			"waits, dead letters, schedules, plans' runs and batches, for people an auth proxy signs in: header H " +
			"with value U acts as user:U, always; without it, 401. Everything is read and done as that principal, " +
			"by its grants. Reach it only through the proxy; its login must be bound to those principals (actor " +
			"bind ROLE 'user:*'). A login that is only a docket_reader member serves read-only. --dev-principal P " +
			"signs everybody in as P: for development only, never behind a real proxy. With --cell NAME=URL, " +
			"repeated, it serves the console of each cell under /cells/NAME/ and at its root a page of every cell, " +
			"each row naming its cell."},
	{"demo", "[--orders N]", "run a small service on docket and show each part of it working",
		"Runs a small order service on docket and shows what became of its invoice jobs; then an order's " +
			"fulfilment as a plan whose failed charge is compensated, a supplier switch case waiting for an " +
			"acknowledgement due in business days, a four-eyes approval task, and a schedule's runs across a " +
			"change of daylight saving time, all on the demo's own clock; it ends with the docket and psql lines " +
			"that read each part. Without a database URL it makes a scratch database, found as tests do."},
	{"help", "[COMMAND [SUBCOMMAND]]", "this list, or a command's usage",
		"Prints the usage of docket, or of a command."},
}
