package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
)

// The bounds of a census's count per state: see [Client.Census].
const (
	DefaultCensusPerState = 10_000
	MaxCensusPerState     = 100_000
)

// Census is how many of a project's jobs are in each queue and state, as
// [Client.Census] counted them.
type Census struct {
	Project string
	// Cells are the counts by queue, then state in the order of [States];
	// a queue and state with no job has no cell.
	Cells []CensusCell
	// PerState is the most jobs of one state the census counted. Capped
	// lists, in the order of States, the states whose count reached it:
	// they may have more, and their counts by queue are of PerState of
	// their jobs, taken in no particular order.
	PerState int
	Capped   []State
}

// CensusCell is how many jobs of one queue are in one state.
type CensusCell struct {
	Queue string
	State State
	Jobs  int
}

// Census counts the client project's jobs by queue and state. See
// [Client.CensusTx].
func (c *Client) Census(ctx context.Context, perState int) (Census, error) {
	return c.census(ctx, c.reads.DB, perState)
}

// CensusTx counts, in tx, the client project's jobs by queue and state, at
// most perState of each state (0 for [DefaultCensusPerState]). The count
// is bounded, not the read: no index holds every job by project and
// state, so a state with fewer jobs than perState is read to the end of
// the project's jobs (see docs/jobs.md). An actor that may not see the
// project's jobs (see [Client.List]) gets an empty census, not an error.
// It refuses a client without a project, or a perState outside
// 1..[MaxCensusPerState], with [db.ErrInvalidArgument].
//
// It reads in tx, so it sees what tx has written and not yet committed,
// and writes nothing: commit and rollback change nothing of it.
func (c *Client) CensusTx(ctx context.Context, tx pgx.Tx, perState int) (Census, error) {
	return c.census(ctx, tx, perState)
}

// census is [Client.CensusTx] on q: the client's pool or the caller's transaction.
func (c *Client) census(ctx context.Context, q db.DBTX, perState int) (Census, error) {
	const op = "job.census"
	if err := c.needProject(op); err != nil {
		return Census{}, err
	}
	if perState == 0 {
		perState = DefaultCensusPerState
	}
	if perState < 1 || perState > MaxCensusPerState {
		return Census{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d jobs a state is outside 1..%d", perState, MaxCensusPerState))
	}
	states := make([]string, len(States))
	for i, s := range States {
		states[i] = string(s)
	}
	rows, err := queries.JobProjectCensus(ctx, q, states, c.project, string(c.actor), int32(perState))
	if err != nil {
		return Census{}, db.Translate(err, op, "project", c.project)
	}
	out := Census{Project: c.project, Cells: make([]CensusCell, len(rows)), PerState: perState}
	total := map[State]int{}
	for i, r := range rows {
		out.Cells[i] = CensusCell{Queue: r.Queue, State: State(r.State), Jobs: int(r.Jobs)}
		total[State(r.State)] += int(r.Jobs)
	}
	for _, s := range States {
		if total[s] >= perState {
			out.Capped = append(out.Capped, s)
		}
	}
	return out, nil
}
