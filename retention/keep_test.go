package retention_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
)

// TestWhatAPruneKeepsWhateverItsAge: prune_keeps_job keeps a run's job and
// the job of a timer of no case, and nothing else, judged on the job's own
// row with its params and case as given.
func TestWhatAPruneKeepsWhateverItsAge(t *testing.T) {
	t.Parallel()
	e := setup(t, hours(1, 2, 24))
	ctx := t.Context()
	timed := finish(t, e, e.jobs, "", jobs.Succeeded)
	plain := finish(t, e, e.jobs, "", jobs.Succeeded)
	require.NoError(t, nameJob(ctx, e.Pool, "timers", timed.ID))
	for _, c := range []struct {
		name   string
		job    int64
		fields string // what the row is given, over the stored one
		keep   bool
	}{
		{"no params", plain.ID, `{"params": null}`, false},
		{"other params", plain.ID, `{"params": {"other": 1}}`, false},
		{"a run's step", plain.ID, `{"params": {"run_id": 1, "step": "a"}}`, true},
		{"a timer's, named by a timer", timed.ID, `{"params": {"timer": "remind"}}`, true},
		{"a timer's, named by none", plain.ID, `{"params": {"timer": "remind"}}`, false},
		{"a case's timer", timed.ID, `{"params": {"timer": "remind"}, "case_id": 7}`, false},
	} {
		var keep bool
		require.NoError(t, e.Pool.QueryRow(ctx, `
			SELECT docket.prune_keeps_job(jsonb_populate_record(j, $2::jsonb)) FROM docket.jobs j WHERE j.id = $1`,
			c.job, c.fields).Scan(&keep), c.name)
		require.Equal(t, c.keep, keep, c.name)
	}

	// The prune's choice asks it of every candidate: inlined there, not
	// called row by row with the whole row built for each call.
	rows, err := e.Pool.Query(ctx, `EXPLAIN (VERBOSE)
		SELECT j.id FROM docket.jobs j WHERE j.state = 'succeeded' AND NOT docket.prune_keeps_job(j)`)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	require.NotContains(t, plan, "prune_keeps_job", plan)
}
