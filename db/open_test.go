package db_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

func TestOpenRefusesMalformedURL(t *testing.T) {
	t.Parallel()
	_, err := db.Open(t.Context(), "postgres://ana:hunter2@db.example:notaport/x")
	require.ErrorIs(t, err, db.ErrInvalidArgument)
	require.NotContains(t, err.Error(), "hunter2")
}

func TestOpenUnreachableNamesHostNotPassword(t *testing.T) {
	t.Parallel()
	_, err := db.Open(t.Context(), "postgres://ana:hunter2@127.0.0.1:1/orders?sslmode=disable&connect_timeout=5")
	require.Error(t, err)
	var ce *db.ConnectError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "127.0.0.1:1", ce.Address())
	require.Contains(t, err.Error(), "127.0.0.1:1")
	require.Contains(t, err.Error(), `database "orders"`)
	require.NotContains(t, err.Error(), "hunter2")
	require.NotContains(t, err.Error(), "\n")
}

func TestOpenAppliesDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := db.PoolConfig("postgres://u@localhost/x")
	require.NoError(t, err)
	require.Equal(t, db.DefaultMaxConnLifetime, cfg.MaxConnLifetime)
	require.Equal(t, db.DefaultConnectTimeout, cfg.ConnConfig.ConnectTimeout)
	require.Equal(t, "docket", cfg.ConnConfig.RuntimeParams["application_name"])

	cfg, err = db.PoolConfig("postgres://u@localhost/x?application_name=billing&pool_max_conn_lifetime=1m")
	require.NoError(t, err)
	require.Equal(t, "billing", cfg.ConnConfig.RuntimeParams["application_name"])
	require.Equal(t, "1m0s", cfg.MaxConnLifetime.String())

	pool := pgtest.NewDB(t)
	var app string
	require.NoError(t, pool.QueryRow(t.Context(), `SHOW application_name`).Scan(&app))
	require.Equal(t, db.DefaultApplicationName, app, "pgtest opens its pools with db.Open")
}
