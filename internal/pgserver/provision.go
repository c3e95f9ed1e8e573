package pgserver

import (
	"context"
	"errors"
)

// provisionPrefix starts the name of every database Provision makes: the
// prefix of pgtest's per-test databases, so that whatever tidies those up
// finds these too.
const provisionPrefix = "docket_t_"

// Database is a throw-away database made by [Provision]. Close it when
// done.
type Database struct {
	// URL connects to the database, as the server's admin role.
	URL string
	// Server says where the server came from (the environment variable, a
	// Starter such as a container, or local binaries) and its admin URL with
	// any password masked, for a program to tell its user.
	Server string

	srv  *Server
	name string
}

// Provision finds a server with [Find] (the environment, then local
// binaries, then starters), creates an empty database on it (no docket schema:
// migrate it with db.Migrate) and returns it. The server is its own:
// [Database.Close] stops it if Provision started it. At most [FindTimeout]
// is spent.
//
// It returns the error of Find, or of creating the database, having
// stopped anything it started.
func Provision(ctx context.Context, starters ...Starter) (*Database, error) {
	ctx, cancel := context.WithTimeout(ctx, FindTimeout)
	defer cancel()
	srv, err := Find(ctx, starters...)
	if err != nil {
		return nil, err
	}
	name := RandomName(provisionPrefix)
	if err := srv.CreateDatabase(ctx, name, "template0"); err != nil {
		return nil, errors.Join(err, srv.Close(context.WithoutCancel(ctx)))
	}
	d := &Database{Server: srv.String(), srv: srv, name: name}
	if d.URL, err = srv.URL(name); err != nil {
		return nil, errors.Join(err, d.Close(context.WithoutCancel(ctx)))
	}
	return d, nil
}

// Close drops the database, disconnecting anyone still connected, and stops
// the server if [Provision] started it. It returns the errors of dropping
// and stopping, if any. Close once.
func (d *Database) Close(ctx context.Context) error {
	return errors.Join(d.srv.DropDatabase(ctx, d.name), d.srv.Close(ctx))
}
