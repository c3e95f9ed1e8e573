package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Server is one PostgreSQL server to create databases on, with a pool of
// admin connections to it. Close it when done.
type Server struct {
	adminURL string        // URL of a database on it with CREATE DATABASE rights
	source   string        // where it came from, for logs; never holds a password
	admin    *pgxpool.Pool // connections for CREATE and DROP DATABASE
	stopper  func(context.Context) error

	// createOptions ends every CREATE DATABASE statement; see Open.
	createOptions string
}

// Open connects to adminURL, the URL of a database on the server for a role
// allowed to CREATE DATABASE, and checks that the server answers. source
// says where the server came from, for [Server.String]. stop, if not nil,
// is what shuts the server down; [Server.Close] calls it. On error Open has
// already called stop. Its errors never contain a password.
//
// A server with a stop function is one the caller started, with fsync off.
// On those (PostgreSQL 15 and later) databases are created with STRATEGY
// FILE_COPY, which copies the template's files instead of writing every
// block to the WAL: several times faster there. Its checkpoints would be
// slow on a server with fsync on, so other servers keep their default.
func Open(ctx context.Context, adminURL, source string, stop func(context.Context) error) (*Server, error) {
	fail := func(err error) (*Server, error) {
		if stop != nil {
			_ = stop(context.Background())
		}
		return nil, err
	}
	if _, err := parseAdminURL(adminURL); err != nil {
		return fail(fmt.Errorf("%s: %w", source, err))
	}
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return fail(fmt.Errorf("%s: parse %s: %w", source, MaskURL(adminURL), err))
	}
	admin, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fail(fmt.Errorf("%s: connect %s: %w", source, MaskURL(adminURL), err))
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return fail(fmt.Errorf("%s: connect %s: %w", source, MaskURL(adminURL), err))
	}
	srv := &Server{adminURL: adminURL, source: source, admin: admin, stopper: stop}
	if stop != nil {
		var version int
		if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
			admin.Close()
			return fail(fmt.Errorf("%s: server version: %w", source, err))
		}
		if version >= 150000 {
			srv.createOptions = " STRATEGY FILE_COPY"
		}
	}
	return srv, nil
}

// String describes the server for logs: where it came from and its admin
// URL, with any password masked.
func (s *Server) String() string {
	return s.source + " at " + MaskURL(s.adminURL)
}

// AdminURL returns the URL Open was given, password included.
func (s *Server) AdminURL() string { return s.adminURL }

// URL returns the URL of database name on s, as the admin role. It fails
// only if the admin URL is not a postgres URL; the error never contains the
// password.
func (s *Server) URL(name string) (string, error) {
	return withDatabase(s.adminURL, name)
}

// CreateDatabase creates database name as a copy of template (template0 for
// an empty one). The error names both databases.
func (s *Server) CreateDatabase(ctx context.Context, name, template string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize() + s.createOptions
	if _, err := s.admin.Exec(ctx, sql); err != nil {
		return fmt.Errorf("create database %s from %s: %w", name, template, err)
	}
	return nil
}

// DropDatabase drops database name if it exists, disconnecting anyone
// still connected. A backend still starting up (a pool closed while it was
// opening a connection) has no role yet, and a role that is not a superuser
// may not terminate it; such a drop is retried a few times. It returns an
// error if the drop fails.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	sql := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
	var err error
	for attempt := range 10 {
		if _, err = s.admin.Exec(ctx, sql); err == nil {
			return nil
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "42501" && pgErr.Code != "55006") {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop database %s: %w", name, err)
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
	return fmt.Errorf("drop database %s: %w", name, err)
}

// Close closes the admin connections and stops the server if the caller of
// Open started it (gave a stop function). It leaves databases alone and
// returns the error of stopping, if any.
func (s *Server) Close(ctx context.Context) error {
	s.admin.Close()
	if s.stopper == nil {
		return nil
	}
	return s.stopper(ctx)
}

// RandomName returns prefix followed by 16 random hex digits: a database
// name, or a password no one can guess.
func RandomName(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return prefix + hex.EncodeToString(b[:])
}
