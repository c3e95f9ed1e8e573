package pgtest

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// CheckIsolation lets the external tests use checkIsolation.
var CheckIsolation = checkIsolation

// checkIsolation creates n migrated databases with newDB in parallel
// subtests; each writes a marker row with its index and must see only its
// own. It logs the time newDB took (min/median/max). One database is
// created first, untimed, so that finding the server and building the
// template do not count.
func checkIsolation(t *testing.T, n int, newDB func(testing.TB) *pgxpool.Pool) {
	warmStart := time.Now()
	newDB(t)
	t.Logf("first database (server + template, if not yet done): %v", time.Since(warmStart).Round(time.Millisecond))

	var (
		mu    sync.Mutex
		setup []time.Duration
	)
	t.Run("parallel", func(t *testing.T) {
		for i := range n {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				pool := newDB(t)
				elapsed := time.Since(start)
				mu.Lock()
				setup = append(setup, elapsed)
				mu.Unlock()

				ctx := t.Context()
				var migrated bool
				require.NoError(t, pool.QueryRow(ctx,
					"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'docket')").Scan(&migrated))
				require.True(t, migrated, "database has no docket schema")

				_, err := pool.Exec(ctx, "CREATE TABLE marker (x int)")
				require.NoError(t, err)
				_, err = pool.Exec(ctx, "INSERT INTO marker VALUES ($1)", i)
				require.NoError(t, err)
				rows, err := pool.Query(ctx, "SELECT x FROM marker")
				require.NoError(t, err)
				got, err := pgx.CollectRows(rows, pgx.RowTo[int])
				require.NoError(t, err)
				require.Equal(t, []int{i}, got)
			})
		}
	})
	require.Len(t, setup, n)
	t.Logf("setup time of %d parallel databases: %s", n, summarize(setup))
}

// summarize formats the minimum, median and maximum of ds.
func summarize(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return "min " + r(s[0]).String() + ", median " + r(s[len(s)/2]).String() + ", max " + r(s[len(s)-1]).String()
}
