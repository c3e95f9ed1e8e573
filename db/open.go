package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool defaults applied by [PoolConfig] where the URL does not set its own
// (pool_max_conns and friends in the URL win).
const (
	DefaultMaxConnLifetime   = time.Hour
	DefaultMaxConnIdleTime   = 5 * time.Minute
	DefaultHealthCheckPeriod = 30 * time.Second
	DefaultConnectTimeout    = 10 * time.Second
	DefaultApplicationName   = "docket"
)

// PoolConfig parses a Postgres URL or keyword/value string into a pool
// configuration with docket's defaults: at least 4 and at most 4 per CPU
// connections (pgxpool's own default), connections recycled after an hour or
// five idle minutes, a ten-second connect timeout and application_name
// "docket". Settings given in the URL win. It refuses a string it cannot parse
// with [ErrInvalidArgument]; the message never contains the password.
func PoolConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgconn redacts the password in parse errors.
		return nil, Refuse(ErrInvalidArgument, "db.open", err.Error())
	}
	if !strings.Contains(url, "pool_max_conn_lifetime") {
		cfg.MaxConnLifetime = DefaultMaxConnLifetime
	}
	if !strings.Contains(url, "pool_max_conn_idle_time") {
		cfg.MaxConnIdleTime = DefaultMaxConnIdleTime
	}
	if !strings.Contains(url, "pool_health_check_period") {
		cfg.HealthCheckPeriod = DefaultHealthCheckPeriod
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = DefaultApplicationName
	}
	return cfg, nil
}

// Open connects a pool to the database at url (see [PoolConfig] for the
// defaults) and checks that the server answers. It refuses a malformed url
// with [ErrInvalidArgument] and an unreachable server with a [*ConnectError]
// naming the host and port, never the password.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := PoolConfig(url)
	if err != nil {
		return nil, err
	}
	return OpenConfig(ctx, cfg)
}

// OpenConfig is [Open] for a configuration the caller has adjusted.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(cfg.ConnConfig.Config, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectError(cfg.ConnConfig.Config, err)
	}
	return pool, nil
}

// ConnectError reports a database that could not be reached. Its message is
// one line naming the address, database and user, and never the password.
type ConnectError struct {
	Host     string
	Port     uint16
	Database string
	User     string
	Err      error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("cannot connect to %s (database %q, user %q): %s",
		e.Address(), e.Database, e.User, oneLine(rootCause(e.Err)))
}

// Address is host:port, or the socket directory for a Unix socket.
func (e *ConnectError) Address() string {
	if strings.HasPrefix(e.Host, "/") {
		return fmt.Sprintf("%s/.s.PGSQL.%d", e.Host, e.Port)
	}
	return net.JoinHostPort(e.Host, fmt.Sprint(e.Port))
}

func (e *ConnectError) Unwrap() error { return e.Err }

func connectError(cfg pgconn.Config, err error) error {
	if err == nil {
		return nil
	}
	return &ConnectError{Host: cfg.Host, Port: cfg.Port, Database: cfg.Database, User: cfg.User, Err: err}
}

// rootCause digs past pgconn's wrapping (which repeats the target) to the
// error that says what went wrong: connection refused, no such host,
// password authentication failed.
func rootCause(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		return opErr.Err
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
