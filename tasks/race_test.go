package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/tasks"
)

// TestThirtyTwoReviewersClaimOneTask releases 32 reviewers' claims of one
// task together, 50 rounds: each round exactly one holds it, and every
// other is refused because it is held (DK002).
func TestThirtyTwoReviewersClaimOneTask(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	const reviewers, rounds = 32, 50
	clients := make([]*tasks.Client, reviewers)
	for i := range clients {
		who := access.Actor(fmt.Sprintf("user:reviewer-%02d", i))
		e.Allow(t, testkit.Grants(who, project, access.TaskReview)...)
		clients[i] = e.as(t, who)
	}
	for round := range rounds {
		task := e.open(t, fmt.Sprintf("P-%d", round), nil)
		release := make(chan struct{})
		errs := make([]error, reviewers)
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				_, errs[i] = c.Claim(ctx, task.ID, 0)
			}()
		}
		close(release)
		wg.Wait()
		held := 0
		for _, err := range errs {
			if err == nil {
				held++
				continue
			}
			require.ErrorIs(t, err, db.ErrStaleClaim, "round %d", round)
		}
		require.Equal(t, 1, held, "round %d", round)
		got, err := e.as(t, rita).Get(ctx, task.ID)
		require.NoError(t, err)
		require.NotNil(t, got.Claim)
		var claims int
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT count(*) FROM docket.task_events WHERE task_id = $1 AND what = 'claimed'`,
			task.ID).Scan(&claims))
		require.Equal(t, 1, claims, "round %d: one claim recorded", round)
	}
}

// TestADecisionRacesTheExpirySweep releases a reviewer's decision and the
// expiry sweep of a task past its deadline together, 50 rounds: exactly one
// settles it, the loser changes nothing (the decision is refused with
// DK007, or the sweep moves nothing), and the continuation is enqueued once
// with the winner's outcome.
func TestADecisionRacesTheExpirySweep(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	w := e.sweeperWorker(t)
	const rounds = 50
	wins := map[string]int{}
	for round := range rounds {
		task := e.open(t, fmt.Sprintf("P-%d", round), func(s *tasks.Spec) {
			s.Deadline = e.Clock.Now().Add(time.Hour)
			s.Expiry = tasks.DecideAutomatically("reject")
		})
		e.Clock.Advance(time.Hour)
		release := make(chan struct{})
		var decideErr, sweepErr error
		var swept int
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-release
			_, decideErr = e.as(t, rita).Decide(ctx, task.ID, "approve", "")
		}()
		go func() {
			defer wg.Done()
			<-release
			swept, sweepErr = w.Sweep(ctx, tasks.SweepExpiry)
		}()
		close(release)
		wg.Wait()
		require.NoError(t, sweepErr)
		got, err := e.as(t, rita).Get(ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, tasks.Decided, got.Status)
		switch {
		case decideErr == nil:
			require.Zero(t, swept, "round %d: the decision won; the sweep moved nothing", round)
			require.Equal(t, "approve", got.Decision)
			require.False(t, got.Automatic)
			wins["decision"]++
		case errors.Is(decideErr, db.ErrAlreadyAnswered):
			require.Equal(t, 1, swept, "round %d", round)
			require.Equal(t, "reject", got.Decision)
			require.True(t, got.Automatic)
			wins["sweep"]++
		default:
			t.Fatalf("round %d: decision: %v", round, decideErr)
		}
		js := e.continuations(t, task)
		require.Len(t, js, 1, "round %d: one continuation", round)
		d, err := tasks.DecisionOf(js[0])
		require.NoError(t, err)
		require.Equal(t, got.Decision, d.Decision, "round %d: it runs with the winner's outcome", round)
		var decided int
		require.NoError(t, e.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM docket.task_events WHERE task_id = $1 AND what = 'decided'`, task.ID).Scan(&decided))
		require.Equal(t, 1, decided)
	}
	t.Logf("of %d rounds: %v", rounds, wins)
}
