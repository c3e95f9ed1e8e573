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

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/show"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1 // the command ran and failed
	exitUsage  = 2 // the command line was wrong
	exitBehind = 3 // status --check: a migration is pending
)

// env reads an environment variable; tests pass their own.
type env func(string) string

// cli is one invocation: where its output goes and whom it acts as.
type cli struct {
	stdout, stderr io.Writer
	url            string
	as             string // --as, before the environment's defaults
	actor          access.Actor
	clock          db.Clock
	needsSchema    bool // the command's action needs docket's schema current
	// replicaURL is --replica-url: a hot standby the read commands read
	// from; replica is its pool while a command runs.
	replicaURL string
	replica    *pgxpool.Pool
	// cells are the --cell NAME=URL flags, in order: the commands that
	// read across cells read these.
	cells cellFlags
}

// run executes the command line args and returns the exit code. Errors are
// printed to stderr as one line.
func run(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, clock: db.SystemClock{}, needsSchema: true}
	cmd, rest, err := c.command(args)
	if err == nil && cmd == "help" {
		if err = c.help(rest); err == nil {
			cmd, rest = rest[0], append(slices.Clone(rest[1:]), "--help")
		}
	}
	cmd, rest = canonical(cmd, rest)
	var action dbAction
	if err == nil {
		action, err = c.dispatch(ctx, cmd, rest, getenv)
	}
	c.resolve(getenv)
	if err == nil && action != nil {
		err = c.withPool(ctx, action)
	}
	var ue usageErr
	switch {
	case err == nil || errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		return c.usageError(ue)
	}
	fmt.Fprintf(stderr, "docket %s: %s\n", commandName(cmd, rest), oneLine(err.Error()))
	if ce := (codeErr{}); errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}

// command reads the global flags before the command, and the command.
func (c *cli) command(args []string) (string, []string, error) {
	args, err := c.leadingGlobals("docket", args)
	switch {
	case err != nil:
		return "", nil, err
	case len(args) == 0:
		return "", nil, usagef("no command")
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		c.printUsage()
		return "", nil, errHelp
	case strings.HasPrefix(args[0], "-"):
		return "", nil, usagef("unknown flag %s before the command (the global flags are --%s, --%s, --%s and --%s)", args[0],
			flagURL, flagAs, flagReplica, flagCell)
	}
	return args[0], args[1:], nil
}

// dispatch runs the command cmd with its arguments rest: those that need
// no database now, the others returning the action to run on one.
func (c *cli) dispatch(ctx context.Context, cmd string, rest []string, getenv env) (dbAction, error) {
	switch cmd {
	case "help": // help help
		c.printHelp(c.flags("help"))
		return nil, errHelp
	case "version":
		return nil, c.version(rest)
	case "migrate":
		return c.migrate(rest)
	case "status":
		return c.status(rest)
	case "project":
		return c.project(rest)
	case "grant", "revoke":
		if cmd == "grant" && firstArg(rest) == "list" {
			args, err := c.leadingGlobals(cmd, rest)
			if err != nil {
				return nil, err
			}
			return c.grants(args[1:])
		}
		return c.grant(cmd, rest)
	case "actor":
		return c.actorCmd(rest)
	case "job":
		return c.job(rest)
	case "queue":
		return c.queueCmd(rest)
	case "demo":
		c.needsSchema = false // it migrates
		return nil, c.demo(ctx, rest, getenv)
	case "lane":
		return c.lanes(rest)
	case "case":
		return c.cases(rest)
	case "wait":
		return c.waits(rest)
	case "dead-letter":
		return c.deadLetters(rest)
	case "schedule":
		return c.schedules(rest)
	case "task":
		return c.taskCmd(rest)
	case "plan":
		return c.plansCmd(rest)
	case "batch":
		return c.batchesCmd(rest)
	case "serve":
		return c.serve(rest)
	}
	var known []string
	for _, h := range helps {
		if name, _, _ := strings.Cut(h.name, " "); !slices.Contains(known, name) {
			known = append(known, name)
		}
	}
	return nil, usagef("unknown command %q%s", cmd, didYouMean(cmd, known, nil))
}

// plurals are the plural spellings of the command groups, each the same
// command as its singular: "docket jobs list" is "docket job list".
var plurals = map[string]string{
	"projects": "project", "grants": "grant", "actors": "actor", "jobs": "job", "queues": "queue",
	"lanes": "lane", "cases": "case", "waits": "wait", "dead-letters": "dead-letter", "schedules": "schedule",
	"tasks": "task", "plans": "plan", "batches": "batch",
}

// bareLists are the plurals that once were list commands of their own,
// taking the project right after them ("docket waits PROJECT"): followed by
// no subcommand of their group, they list.
var bareLists = []string{"grants", "waits", "dead-letters", "tasks"}

// canonical is the command cmd with its arguments rest in the singular form
// the usage shows: a plural is its group's singular, and a bare list
// command ("tasks PROJECT") its group's list ("task list PROJECT").
func canonical(cmd string, rest []string) (string, []string) {
	noun, ok := plurals[cmd]
	if !ok {
		return cmd, rest
	}
	if slices.Contains(bareLists, cmd) {
		if first := firstArg(rest); first != "help" && !slices.Contains(subcommands(noun), first) {
			return noun, append([]string{"list"}, rest...)
		}
	}
	return noun, rest
}

// firstArg is the first argument of rest that is not a global flag or its
// value, or "".
func firstArg(rest []string) string {
	for i := 0; i < len(rest); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(rest[i], "-"), "=")
		if !strings.HasPrefix(rest[i], "-") || !isGlobal(name) {
			return rest[i]
		}
		if !hasValue {
			i++
		}
	}
	return ""
}

// resolve fills in the database URL and the actor from the environment
// where the command line left them out.
func (c *cli) resolve(getenv env) {
	if c.url == "" {
		c.url = firstNonEmpty(getenv("DOCKET_DATABASE_URL"), getenv("DATABASE_URL"))
	}
	if c.replicaURL == "" {
		c.replicaURL = getenv("DOCKET_REPLICA_URL")
	}
	c.actor = access.Actor(firstNonEmpty(c.as, getenv("DOCKET_ACTOR"), defaultActor(getenv)))
}

// commandName is the command and, for a group, its subcommand, for
// messages.
func commandName(cmd string, rest []string) string {
	for i := 0; i < len(rest); i++ {
		name := strings.TrimLeft(rest[i], "-")
		if isGlobal(name) {
			i++ // and its value
			continue
		}
		if _, ok := helpOf(cmd + " " + rest[i]); ok {
			return cmd + " " + rest[i]
		}
		break
	}
	return cmd
}

// usageErr is a wrong command line, answered with exit code 2; cmd names
// the command, when known.
type usageErr struct {
	cmd string
	error
}

// usagef is a wrong command line of no command in particular.
func usagef(format string, args ...any) error { return usageErr{error: fmt.Errorf(format, args...)} }

// codeErr is a failure answered with its own exit code.
type codeErr struct {
	code int
	error
}

// listArgs reads the PROJECT of a list command from rest, and checks its
// --limit and, when it pages by id, its --after.
func (c *cli) listArgs(fs *flag.FlagSet, rest []string, limit *int, after *int64) (string, error) {
	pos, err := c.parse(fs, rest, "PROJECT")
	if err != nil {
		return "", err
	}
	if err := badLimit(fs, "limit", *limit, db.MaxPage); err != nil {
		return "", err
	}
	if after != nil && *after < 0 {
		return "", usageOf(fs, "--after %d: want an id, 0 or more", *after)
	}
	return pos[0], nil
}

// checkOneOf refuses a value v of the filter flag name of the command fs is
// named for that is not empty and not one of known.
func checkOneOf[T ~string](fs *flag.FlagSet, name, v string, known []T) error {
	if v != "" && !slices.Contains(known, T(v)) {
		return usageOf(fs, "--%s %q: want one of %s", name, v, show.JoinStates(known))
	}
	return nil
}

func (c *cli) usageError(err usageErr) int {
	if err.cmd == "" || err.cmd == "docket" {
		fmt.Fprintf(c.stderr, "docket: %s (run \"docket help\" for usage)\n", oneLine(err.Error()))
	} else {
		fmt.Fprintf(c.stderr, "docket %s: %s (run \"docket help %s\")\n", err.cmd, oneLine(err.Error()), err.cmd)
	}
	return exitUsage
}

// dbAction is a command whose arguments have been checked, waiting for a
// connection.
type dbAction func(ctx context.Context, pool *pgxpool.Pool) error

func (c *cli) withPool(ctx context.Context, fn dbAction) error {
	if c.url == "" && len(c.cells) > 0 {
		return fn(ctx, nil) // it reads the cells
	}
	if c.url == "" {
		return usagef("no database URL: pass --database-url or set DOCKET_DATABASE_URL or DATABASE_URL")
	}
	pool, err := db.Open(ctx, c.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if c.needsSchema {
		if err := requireSchema(ctx, pool); err != nil {
			return err
		}
	}
	if c.replicaURL != "" {
		if c.replica, err = c.openReplica(ctx, pool); err != nil {
			return err
		}
		defer c.replica.Close()
	}
	return schemaHint(pool, fn(ctx, pool))
}

// requireSchema refuses a database whose docket or River schema is behind
// this build's, or absent, with a sentence saying to migrate it. A login
// that may not read the version tables passes: schemaHint words what then
// fails for want of the schema.
func requireSchema(ctx context.Context, pool *pgxpool.Pool) error {
	s, err := db.MigrationStatus(ctx, pool)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case s.Version == 0:
		return fmt.Errorf("the database at %s has no docket schema; run \"docket migrate\"", where(pool))
	case s.Version < s.Latest || s.RiverVersion < s.RiverLatest:
		return fmt.Errorf("the database at %s is behind: docket schema version %d of %d, River's %d of %d; run \"docket migrate\"",
			where(pool), s.Version, s.Latest, s.RiverVersion, s.RiverLatest)
	}
	return nil
}

// schemaHint words an error for want of a table, function or schema as
// what it most likely means: a database not migrated to this build.
func schemaHint(pool *pgxpool.Pool, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42P01", "42883", "3F000": // undefined table, undefined function, invalid schema name
			return fmt.Errorf("the database at %s has no docket schema (or is behind this build's): %s; run \"docket migrate\"",
				where(pool), pgErr.Message)
		}
	}
	return err
}

// where names the database behind pool as HOST:PORT/DB, never with its
// password.
func where(pool *pgxpool.Pool) string {
	cc := pool.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
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
