package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/jobclaim"
	"github.com/docket-dev/docket/jobs"
)

// The positions a queue's claims begin at: from the head first, then where
// the last full claim began in each project, until a claim comes up short
// or the rescan interval has passed since the last head read.
func TestQueueClaimsBeginWhereTheLastFullClaimBegan(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	job := func(project string, id int64, priority int, at time.Time) jobs.Job {
		return jobs.Job{ID: id, Project: project, Priority: priority, AvailableAt: at}
	}
	pos := func(id int64, priority int, at time.Time) jobclaim.Position {
		return jobclaim.Position{Priority: priority, AvailableAt: at, ID: id}
	}
	q := &queueState{}
	const rescan = 100 * time.Millisecond
	now := time.Unix(1_800_000_000, 0)

	require.Nil(t, q.claimFrom(now, rescan), "the first claim reads from the head")
	// A full claim, in two projects: each begins next at the first job
	// taken there, in the claim order (not the answer's order).
	q.claimed(3, []jobs.Job{job("acme", 12, 2, t0), job("beta", 30, 1, t0), job("acme", 11, 2, t0.Add(time.Second))})
	want := map[string]jobclaim.Position{"acme": pos(12, 2, t0), "beta": pos(30, 1, t0)}
	require.Equal(t, want, q.claimFrom(now.Add(rescan/2), rescan))

	// A full claim of acme only: beta's position stays.
	q.claimed(1, []jobs.Job{job("acme", 13, 2, t0)})
	want = map[string]jobclaim.Position{"acme": pos(13, 2, t0), "beta": pos(30, 1, t0)}
	got := q.claimFrom(now.Add(rescan-1), rescan)
	require.Equal(t, want, got)

	// The rescan interval since the last head read: from the head, and the
	// positions are those of the claims after it.
	require.Nil(t, q.claimFrom(now.Add(rescan), rescan))
	require.Nil(t, q.claimFrom(now.Add(rescan+1), rescan), "no full claim since the head read")
	q.claimed(1, []jobs.Job{job("acme", 20, 3, t0)})
	require.Equal(t, map[string]jobclaim.Position{"acme": pos(20, 3, t0)}, q.claimFrom(now.Add(rescan+2), rescan))
	require.Equal(t, want, got, "a map handed to a claim is never changed under it")

	// A short claim: the next reads from the head.
	q.claimed(5, []jobs.Job{job("acme", 21, 3, t0)})
	require.Nil(t, q.claimFrom(now.Add(rescan+3), rescan))
	q.claimed(1, []jobs.Job{job("acme", 22, 3, t0)})
	require.NotNil(t, q.claimFrom(now.Add(rescan+4), rescan))

	// A rescan of 0 (a negative Batching.Rescan): every claim from the head.
	require.Nil(t, q.claimFrom(now.Add(rescan+5), 0))
	q.claimed(1, []jobs.Job{job("acme", 23, 3, t0)})
	require.Nil(t, q.claimFrom(now.Add(rescan+5), 0))
}

func TestPositionsOrderAsClaimsDo(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	ordered := []jobclaim.Position{
		{Priority: 1, AvailableAt: t0.Add(time.Hour), ID: 9},
		{Priority: 2, AvailableAt: t0, ID: 5},
		{Priority: 2, AvailableAt: t0, ID: 6},
		{Priority: 2, AvailableAt: t0.Add(time.Microsecond), ID: 1},
		{Priority: 4, AvailableAt: t0, ID: 1},
	}
	for i, p := range ordered {
		for j, q := range ordered {
			require.Equal(t, i < j, p.Before(q), "%d before %d", i, j)
		}
	}
}
