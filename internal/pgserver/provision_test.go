package pgserver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A provisioned database is empty and gone after Close, even with a
// connection still open.
func TestProvisionAndClose(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, err := Provision(ctx)
	if errors.Is(err, ErrNotFound) {
		t.Skip(err)
	}
	require.NoError(t, err)
	require.NotEmpty(t, d.Server)

	// Look, then Close with the connection open: Close runs even if the
	// look fails, so nothing is left behind.
	var name string
	var schemas int
	conn, lookErr := pgx.Connect(ctx, d.URL)
	if lookErr == nil {
		defer conn.Close(context.Background())
		lookErr = conn.QueryRow(ctx, `SELECT current_database(), (SELECT count(*) FROM pg_namespace
			WHERE nspname NOT LIKE 'pg\_%' AND nspname NOT IN ('public', 'information_schema'))`).Scan(&name, &schemas)
	}
	require.NoError(t, errors.Join(lookErr, d.Close(ctx)))
	require.True(t, strings.HasPrefix(name, provisionPrefix), name)
	require.Zero(t, schemas, "a provisioned database starts empty")

	if again, err := pgx.Connect(ctx, d.URL); err == nil {
		_ = again.Close(ctx)
		t.Fatal("the database outlived Close")
	}
}
