// Command docket is the operator's tool for a docket database: migrate it,
// see where it stands, and manage projects and grants.
//
// Usage:
//
//	docket COMMAND [ARGS] [flags]
//
// Flags go before or after the arguments; the global ones, --database-url
// and --as, anywhere on the line. The database URL comes from
// --database-url, else DOCKET_DATABASE_URL, else DATABASE_URL. Run "docket
// help" for the commands and "docket COMMAND --help" for one's flags; the
// read commands print JSON with -o json (docs/operators.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
