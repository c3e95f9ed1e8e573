package pgtest

import (
	"context"
	"fmt"

	"github.com/docket-dev/docket/internal/pgserver"
)

// Database is a throw-away database made by [Provision], on a server found
// the way tests find one. Close it when done. Its URL field connects to the
// database as the server's admin role; its Server field says where the
// server came from and its admin URL with any password masked, for a
// program to tell its user.
type Database = pgserver.Database

// Provision finds a PostgreSQL server the way [NewDB] does (see the package
// documentation: DOCKET_TEST_DATABASE_URL, local binaries, a Docker engine),
// creates an empty database on it (no docket schema: migrate it with
// db.Migrate) and returns it. It is for programs without a testing.T. The
// server is its own, not the one tests in the same process share:
// [Database.Close] drops the database and stops the server if Provision
// started it.
//
// It returns the error on which [NewDB] would fail a test, having stopped
// anything it started.
func Provision(ctx context.Context) (*Database, error) {
	d, err := pgserver.Provision(ctx, docker)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return d, nil
}
