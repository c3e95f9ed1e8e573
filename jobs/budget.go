package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
)

// Budget is what a job's attempts may spend, together: ceilings on effects
// (outside changes a handler counts, such as messages sent) and on money, in
// integer minor units of one currency (cents of EUR, say). A zero ceiling is
// none; the zero Budget sets no ceiling at all.
//
// Each attempt's handler reports what it spent with its outcome ([Spend];
// in a worker, worker.ReportSpend). An attempt that succeeded stands,
// whatever it spent. One that failed retryably and left a ceiling reached
// makes the job [Exhausted] instead of queued again: not failed, and run by
// nobody until [Client.Resume] raises the ceiling. A job with a money
// ceiling also reserves, at each claim, what it may still spend in its
// project's spend quota for Currency (see docs/budgets.md); a claim the
// quota cannot take leaves the job exhausted until it is resumed.
type Budget struct {
	// Effects is the most effects the job's attempts may report (0: no
	// ceiling).
	Effects int64
	// Money is the most money they may report, in minor units of Currency
	// (0: no ceiling).
	Money int64
	// Currency is the ISO 4217 code Money counts in: three capital
	// letters, set exactly when Money is.
	Currency string
}

var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

// IsZero reports whether b sets no ceiling.
func (b Budget) IsZero() bool { return b == Budget{} }

// Validate refuses, with [db.ErrInvalidArgument], a budget the database
// would refuse: a negative ceiling, a money ceiling without a currency or a
// currency without one, a currency that is not three capital letters.
func (b Budget) Validate() error {
	if p := b.problem(); p != "" {
		return invalid("%s", p)
	}
	return nil
}

// problem says what Validate refuses, or is empty.
func (b Budget) problem() string {
	switch {
	case b.Effects < 0 || b.Money < 0:
		return fmt.Sprintf("budget: ceilings are whole numbers of zero (none) or more, not effects %d, money %d", b.Effects, b.Money)
	case (b.Money > 0) != (b.Currency != ""):
		return fmt.Sprintf("budget: a money ceiling and its currency come together (money %d, currency %q)", b.Money, b.Currency)
	case b.Currency != "" && !currencyPattern.MatchString(b.Currency):
		return fmt.Sprintf("budget: invalid currency %q: want three capital letters (ISO 4217)", b.Currency)
	}
	return ""
}

// json is b as docket.job_enqueue_one takes it; nil when it sets no ceiling.
func (b Budget) json() json.RawMessage {
	if b.IsZero() {
		return nil
	}
	m := map[string]any{}
	if b.Effects > 0 {
		m["effects"] = b.Effects
	}
	if b.Money > 0 {
		m["money"], m["currency"] = b.Money, b.Currency
	}
	out, _ := json.Marshal(m)
	return out
}

// Spend is what an attempt spent, reported with its outcome: effects, and
// money in integer minor units of the job's budget's currency. Both are
// zero or more.
type Spend struct {
	Effects int64 `json:"effects,omitempty"`
	Money   int64 `json:"money,omitempty"`
}

// validate refuses a negative report, for job id, as op.
func (s Spend) validate(op string, id int64) error {
	if s.Effects < 0 || s.Money < 0 {
		return db.Refuse(db.ErrInvalidArgument, op,
			fmt.Sprintf("spend report (effects %d, money %d): want whole numbers of zero or more", s.Effects, s.Money), "job", id)
	}
	return nil
}

// Ceilings are what [Client.Resume] raises an exhausted job's budget to: a
// zero field keeps that ceiling as it is.
type Ceilings struct {
	Effects int64
	Money   int64
}

// Resume puts exhausted job id back in the queue, its ceilings raised to c.
// See [Client.ResumeTx].
func (c *Client) Resume(ctx context.Context, id int64, to Ceilings) (Job, error) {
	return c.resume(ctx, c.pool, id, to)
}

// ResumeTx puts [Exhausted] job id back in the queue in tx, due at once,
// its ceilings raised to c (a zero field keeps one). The move is an event
// of the job's history whose detail records the raise and who made it. A
// job its project's quota stopped at a claim resumes with its ceilings as
// they were, and reserves again at its next claim. Resuming again a job
// already queued with those ceilings is a quiet no-op.
//
// It refuses, changing nothing: an unknown job, or one the actor may not
// read, with [db.ErrNotFound]; an actor without budget.manage on the job's
// project with [db.ErrNotPermitted]; a finished job with [db.ErrTerminal],
// and another that is not exhausted with [db.ErrIllegalTransition]; a ceiling lowered, added where the job has none, or not
// above what was spent, or a negative one, with [db.ErrInvalidArgument].
//
// What it writes commits with tx, or rolls back with it.
func (c *Client) ResumeTx(ctx context.Context, tx pgx.Tx, id int64, to Ceilings) (Job, error) {
	return c.resume(ctx, tx, id, to)
}

func (c *Client) resume(ctx context.Context, q db.DBTX, id int64, to Ceilings) (Job, error) {
	const op = "job.resume"
	if to.Effects < 0 || to.Money < 0 {
		return Job{}, db.Refuse(db.ErrInvalidArgument, op,
			fmt.Sprintf("ceilings are whole numbers of zero (keep) or more, not effects %d, money %d", to.Effects, to.Money), "job", id)
	}
	row, err := queries.JobResume(ctx, q, dbsqlc.JobResumeParams{
		ID: id, MaxEffects: positive(to.Effects), MaxMoney: positive(to.Money), Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Job{}, db.Translate(err, op, "job", id)
	}
	return fromRow(row), nil
}

// positive is &n when n > 0, else nil.
func positive(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}

// budgetOf reads a job row's budget columns.
func budgetOf(effects, money *int64, currency *string) Budget {
	var b Budget
	if effects != nil {
		b.Effects = *effects
	}
	if money != nil {
		b.Money = *money
	}
	b.Currency = deref(currency)
	return b
}
