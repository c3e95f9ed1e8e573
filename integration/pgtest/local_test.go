package pgtest

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/pgserver"
)

// Databases on a private local server, which creates them with STRATEGY
// FILE_COPY, are as separate as on the shared server.
func TestNewDBOnLocalServer(t *testing.T) {
	t.Parallel()
	ps, err := pgserver.StartLocal(t.Context())
	if errors.Is(err, pgserver.ErrNoLocalBinaries) {
		t.Skip("no PostgreSQL server binaries installed")
	}
	require.NoError(t, err)
	srv := &server{Server: ps}
	t.Cleanup(func() { require.NoError(t, srv.Close(context.Background())) })
	t.Logf("pgtest: using %s", srv)

	checkIsolation(t, 20, func(t testing.TB) *pgxpool.Pool { return defaultSuite.newDB(t, srv) })
}
