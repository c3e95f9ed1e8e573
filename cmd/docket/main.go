// Command docket is the operator's tool for a docket database: migrate it,
// see where it stands, and manage projects and grants.
//
// Usage:
//
//	docket [--database-url URL] COMMAND [ARGS]
//
// The database URL comes from --database-url, else DOCKET_DATABASE_URL, else
// DATABASE_URL. Run "docket help" for the commands.
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
