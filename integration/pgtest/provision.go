package pgtest

import (
	"context"
	"errors"
)

// Database is a throw-away database made by [Provision], on a server found
// the way tests find one. Close it when done.
type Database struct {
	// URL connects to the database, as the server's admin role.
	URL string
	// Server says where the server came from (the environment variable, a
	// container or local binaries) and its admin URL with any password
	// masked, for a program to tell its user.
	Server string

	srv  *server
	name string
}

// Provision finds a PostgreSQL server the way [NewDB] does (see the package
// documentation: DOCKET_TEST_DATABASE_URL, a Docker engine, local binaries),
// creates an empty database on it (no docket schema: migrate it with
// db.Migrate) and returns it. It is for programs without a testing.T, such
// as a demo. The server is its own, not the one tests in the same process
// share: [Database.Close] stops it if Provision started it.
//
// It returns the error on which [NewDB] would fail a test, having stopped
// anything it started.
func Provision(ctx context.Context) (*Database, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	srv, err := findServer(ctx)
	if err != nil {
		return nil, err
	}
	name, err := srv.createDB(ctx, "template0")
	if err != nil {
		return nil, errors.Join(err, srv.shutdown(context.WithoutCancel(ctx)))
	}
	d := &Database{Server: srv.String(), srv: srv, name: name}
	if d.URL, err = withDatabase(srv.adminURL, name); err != nil {
		return nil, errors.Join(err, d.Close(context.WithoutCancel(ctx)))
	}
	return d, nil
}

// Close drops the database, disconnecting anyone still connected, and stops
// the server if [Provision] started it. It returns the errors of dropping
// and stopping, if any. Close once.
func (d *Database) Close(ctx context.Context) error {
	return errors.Join(d.srv.dropDB(ctx, d.name), d.srv.shutdown(ctx))
}
