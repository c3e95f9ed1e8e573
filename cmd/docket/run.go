package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/user"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command line was wrong
)

const usage = `usage: docket [--database-url URL] COMMAND [ARGS]

commands:
  migrate                         apply River's and docket's migrations (idempotent)
  migrate down --to N             roll docket's migrations back to version N
  status                          schema versions, docket's group roles, row counts per table
  project create NAME             create an active project
  project list                    list projects
  project archive|activate|retire NAME
                                  move a project along its status machine
  grant PRINCIPAL PROJECT CAPABILITY
                                  grant a capability on a project
  revoke PRINCIPAL PROJECT CAPABILITY
                                  revoke it
  grants PROJECT                  list the grants on a project
  actor bind|unbind ROLE PRINCIPAL
                                  let a login role act as a principal (or kind:*), or no longer
  actor list [ROLE]               the bindings of a login role, or all of them
  job list PROJECT [--state S] [--kind K] [--queue Q] [--limit N]
                                  list a project's jobs, newest first
  job show ID                     a job, its history, and whether the history verifies
  job cancel ID [--reason TEXT]   cancel a queued, claimed or uncertain job
  job reconcile ID succeeded|failed|queued [--note TEXT] [--result JSON]
                                  settle an uncertain job
  job sweep [--limit N]           move expired leases on (queued, dead or uncertain)
  lanes list PROJECT [--quorum Q] [--state S] [--review R] [--limit N] [--after ID]
                                  list the lanes of a project you may see, oldest first
  lanes show ID                   a lane, its history and its jobs
  cases list PROJECT [--status S] [--limit N] [--after ID]
                                  list the cases of a project you may see, oldest first
  cases show ID                   a case, its keys, obligations and history
  waits PROJECT [--case ID] [--limit N]
                                  waiting waits you may see, soonest deadline first
  dead-letters PROJECT [--limit N]
                                  messages no wait will claim, newest first (no payloads)
  schedules list PROJECT [--limit N] [--after NAME]
                                  list the schedules of a project you may see, by name
  schedules preview ID | CRON ZONE [--count N] [--from T]
                                  the next occurrences: local time, fold, UTC instant
  tasks PROJECT [--mine] [--limit N]
                                  the tasks you may take now and those you hold,
                                  soonest deadline first (--mine: only those you hold)
  task show ID                    a task: what is to be decided, who may not answer
                                  it (four eyes), its claim, decision and history
  plans show RUN [--json]         a run of a plan: its status, budget, trust and
                                  failure, its plan's graph with each step's state,
                                  arguments' sources and compensation, and its
                                  plan's versions
  batches show ID [--limit N] [--after KEY] [--json]
                                  a batch: its plan, source, cursor and census, and
                                  its items failed, quarantined or in flight, oldest
                                  key first (--limit default 20)
  serve --project P[,P...] [--addr HOST:PORT] [--auth-header H] [--dev-principal P]
                                  a web worklist of those projects at --addr (default
                                  127.0.0.1:8080) for reviewers an auth proxy signs in:
                                  header H (default X-Forwarded-User) with value U acts
                                  as user:U, always; without it, 401. Reach it only through the proxy; its login must
                                  be bound to those principals (actor bind ROLE 'user:*').
                                  --dev-principal P signs everybody in as P: for
                                  development only, never behind a real proxy
  version                         build, schema and River versions
  demo [--orders N]               run a small order service on docket and show
                                  what became of its jobs (without a database
                                  URL: a scratch database, found as tests do)

The database URL comes from --database-url, else DOCKET_DATABASE_URL, else
DATABASE_URL. Changes are recorded as made by --as ACTOR (default user:$USER).
`

// env reads an environment variable; tests pass their own.
type env func(string) string

// cli is one invocation: where its output goes and whom it acts as.
type cli struct {
	stdout, stderr io.Writer
	url            string
	actor          access.Actor
	clock          db.Clock
}

// run executes the command line args and returns the exit code. Errors are
// printed to stderr as one line.
func run(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, clock: db.SystemClock{}}
	fs := flag.NewFlagSet("docket", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.url, "database-url", "", "Postgres URL")
	as := fs.String("as", "", "actor recorded for changes")
	if err := fs.Parse(args); err != nil {
		return c.usageError(err)
	}
	args = fs.Args()
	if len(args) == 0 {
		return c.usageError(errors.New("no command"))
	}
	if c.url == "" {
		c.url = firstNonEmpty(getenv("DOCKET_DATABASE_URL"), getenv("DATABASE_URL"))
	}
	c.actor = access.Actor(firstNonEmpty(*as, getenv("DOCKET_ACTOR"), defaultActor(getenv)))

	cmd, rest := args[0], args[1:]
	var (
		action dbAction
		err    error
	)
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "version":
		err = c.version(rest)
	case "migrate":
		action, err = c.migrate(rest)
	case "status":
		action, err = c.status(rest)
	case "project":
		action, err = c.project(rest)
	case "grant", "revoke":
		action, err = c.grant(cmd, rest)
	case "grants":
		action, err = c.grants(rest)
	case "actor":
		action, err = c.actorCmd(rest)
	case "job":
		action, err = c.job(rest)
	case "demo":
		err = c.demo(ctx, rest)
	case "lanes":
		action, err = c.lanes(rest)
	case "cases":
		action, err = c.cases(rest)
	case "waits":
		action, err = c.waits(rest)
	case "dead-letters":
		action, err = c.deadLetters(rest)
	case "schedules":
		action, err = c.schedules(rest)
	case "tasks":
		action, err = c.tasksCmd(rest)
	case "task":
		action, err = c.taskCmd(rest)
	case "plans":
		action, err = c.plansCmd(rest)
	case "batches":
		action, err = c.batchesCmd(rest)
	case "serve":
		action, err = c.serve(rest)
	default:
		return c.usageError(fmt.Errorf("unknown command %q", cmd))
	}
	if err == nil && action != nil {
		err = c.withPool(ctx, action)
	}
	var ue usageErr
	if errors.As(err, &ue) {
		return c.usageError(ue)
	}
	if err != nil {
		fmt.Fprintf(stderr, "docket %s: %s\n", cmd, oneLine(err.Error()))
		return exitError
	}
	return exitOK
}

// usageErr is a wrong command line, answered with exit code 2.
type usageErr struct{ error }

func usagef(format string, args ...any) error { return usageErr{fmt.Errorf(format, args...)} }

// listArgs reads the PROJECT of list command cmd from rest, refusing its
// absence with usage, and checks the command's --limit and, when it pages
// by id, its --after.
func listArgs(fs *flag.FlagSet, rest []string, cmd, usage string, limit *int, after *int64) (string, error) {
	project, err := oneArg(fs, rest, usage)
	switch {
	case err != nil:
		return "", err
	case *limit < 1 || *limit > db.MaxPage:
		return "", usagef("%s --limit must be 1..%d", cmd, db.MaxPage)
	case after != nil && *after < 0:
		return "", usagef("%s --after must not be negative", cmd)
	}
	return project, nil
}

// checkOneOf refuses a value v of cmd's filter flag that is not empty and
// not one of known.
func checkOneOf[T ~string](cmd, flag, v string, known []T) error {
	if v != "" && !slices.Contains(known, T(v)) {
		return usagef("%s --%s %q: want one of %s", cmd, flag, v, joinStates(known))
	}
	return nil
}

func (c *cli) usageError(err error) int {
	fmt.Fprintf(c.stderr, "docket: %s (run \"docket help\" for usage)\n", oneLine(err.Error()))
	return exitUsage
}

// dbAction is a command whose arguments have been checked, waiting for a
// connection.
type dbAction func(ctx context.Context, pool *pgxpool.Pool) error

func (c *cli) withPool(ctx context.Context, fn dbAction) error {
	if c.url == "" {
		return usagef("no database URL: pass --database-url or set DOCKET_DATABASE_URL or DATABASE_URL")
	}
	pool, err := db.Open(ctx, c.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(ctx, pool)
}

func defaultActor(getenv env) string {
	name := getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "unknown"
	}
	return "user:" + name
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// joinStates lists the values of a state type, for usage messages.
func joinStates[S ~string](states []S) string {
	s := make([]string, len(states))
	for i, x := range states {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// dash shows an empty field as "-" in a table.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
