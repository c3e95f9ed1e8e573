package budgets

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/budgets"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/jobs"
)

var queries = dbsqlc.New()

// Money is an amount in integer minor units (cents) of a currency.
type Money struct {
	Amount   int64
	Currency string // ISO 4217: three capital letters
}

// Budget is a run's ceilings; a zero field is no ceiling.
type Budget struct {
	// MaxSteps bounds the steps the run admits.
	MaxSteps int
	// MaxEffects bounds the effects its steps report, an exact count: each
	// step admitted takes one effect slot, given back when it ends.
	MaxEffects int64
	// MaxMoney bounds what its steps report they spent.
	MaxMoney Money
	// MaxCall is the most one step's operation may cost, in MaxMoney's
	// currency: what each step in flight may still spend.
	MaxCall int64
	// MaxParallel bounds how many of its steps are in flight at once.
	MaxParallel int
	// MaxDuration bounds how long the run goes on admitting steps: the time
	// between the earliest and latest instants it read at its step
	// boundaries (each reading journaled). It stops the next step; a step
	// in flight is not interrupted.
	MaxDuration time.Duration
	// MaxRefusals is how many of its steps the policy may refuse (a step
	// that requires trusted input and would get untrusted) before the run
	// is exhausted; below it, a refused step's branch stops and the rest of
	// the run goes on. Without it, the first refusal unwinds the run.
	MaxRefusals int
}

// Extra returns b's wall-clock and refusal ceilings as the database takes
// them (nil: none).
func (b Budget) Extra() (duration *time.Duration, refusals *int32) {
	if b.MaxDuration > 0 {
		duration = &b.MaxDuration
	}
	if b.MaxRefusals > 0 {
		v := int32(b.MaxRefusals)
		refusals = &v
	}
	return duration, refusals
}

// Zero reports whether b sets no ceiling.
func (b Budget) Zero() bool { return b == Budget{} }

var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)

// Validate refuses, with [db.ErrInvalidArgument], negative ceilings, a
// money ceiling without a currency, and MaxCall without MaxMoney.
func (b Budget) Validate() error {
	const op = "budget.validate"
	switch {
	case b.MaxSteps < 0 || b.MaxEffects < 0 || b.MaxMoney.Amount < 0 || b.MaxCall < 0 || b.MaxParallel < 0 || b.MaxDuration < 0 ||
		b.MaxRefusals < 0:
		return db.Refuse(db.ErrInvalidArgument, op, "a ceiling is 0 (none) or more")
	case b.MaxParallel > 10000 || b.MaxSteps > 1000000 || b.MaxRefusals > 1000000:
		return db.Refuse(db.ErrInvalidArgument, op, "at most 1000000 steps, 10000 in flight and 1000000 refusals")
	case (b.MaxMoney.Amount > 0 || b.MaxMoney.Currency != "") && !currencyPattern.MatchString(b.MaxMoney.Currency):
		return db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid currency %q: three capital letters (ISO 4217)", b.MaxMoney.Currency))
	case b.MaxCall > 0 && b.MaxMoney.Currency == "":
		return db.Refuse(db.ErrInvalidArgument, op, "MaxCall is money: it needs MaxMoney's currency")
	}
	return nil
}

func nz[T int | int64](v T) *T {
	if v == 0 {
		return nil
	}
	return &v
}

// Args are b as the database takes it: NULL for no ceiling.
func (b Budget) Args() (steps *int32, effects, money *int64, currency *string, call *int64, parallel *int32) {
	if b.MaxSteps > 0 {
		v := int32(b.MaxSteps)
		steps = &v
	}
	if b.MaxParallel > 0 {
		v := int32(b.MaxParallel)
		parallel = &v
	}
	effects, call = nz(b.MaxEffects), nz(b.MaxCall)
	if b.MaxMoney.Currency != "" {
		money, currency = &b.MaxMoney.Amount, &b.MaxMoney.Currency
	}
	return
}

// Spent is what a step reports it spent: the shape a job's attempt
// reports ([jobs.Spend]).
type Spent = jobs.Spend

// Report is a step's result value with what it spent, as the member spent:
// the result a handler returns for its run's tally to count it. value must
// encode as a JSON object (or be nil).
func Report(value any, s Spent) (json.RawMessage, error) {
	m := map[string]any{}
	if value != nil {
		b, err := json.Marshal(value)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("budgets.Report: the value must be a JSON object: %w", err)
		}
	}
	m["spent"] = s
	return json.Marshal(m)
}

// Config configures a [Client].
type Config struct {
	// Actor needs budget.manage (and plan.run, to resume runs). Required.
	Actor access.Actor
	Clock db.Clock
}

// Client sets quotas and resumes exhausted runs, as one actor.
type Client struct {
	pool  db.Pool
	actor access.Actor
	clock db.Clock
}

// NewClient returns a client on pool; it refuses a nil pool or a malformed
// actor with [db.ErrInvalidArgument].
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("budgets.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, actor: cfg.Actor, clock: clock}, nil
}

// Quota is at most Amount per Period for a project, periods counted from
// Anchor.
type Quota struct {
	Project string
	Amount  Money
	Period  time.Duration
	Anchor  time.Time
}

// SetQuota sets project's spend quota for q.Amount.Currency. It refuses a
// malformed currency, a period outside 1 minute .. 400 days, a negative
// amount ([db.ErrInvalidArgument]), and an actor without budget.manage
// ([db.ErrNotPermitted]).
func (c *Client) SetQuota(ctx context.Context, q Quota) error {
	_, err := queries.BudgetQuotaSet(ctx, c.pool, dbsqlc.BudgetQuotaSetParams{Project: q.Project, Currency: q.Amount.Currency,
		Period: q.Period, Anchor: q.Anchor, Amount: q.Amount.Amount, Actor: string(c.actor), Now: c.clock.Now()})
	return db.Translate(err, "budget.set_quota", "project", q.Project)
}

// State is a run's budget after a resume.
type State struct {
	RunID     int64
	Status    string
	Exhausted string // why it is exhausted again, if it is
	Budget    Budget
	Spent     Spent
}

// Resume raises the ceilings of exhausted run id to raise (zero fields
// keep theirs) and resumes it: the raise is recorded, the refusal evaluated
// again (a run still over a ceiling is exhausted again, saying why), and
// its worst case reserved again in the quota. It refuses a run that is not
// exhausted — one that compensated cannot resume — ([db.ErrTerminal]), a
// lowered ceiling ([db.ErrInvalidArgument]), a quota the raise would
// exceed or an actor without budget.manage ([db.ErrNotPermitted]), and a
// run the actor may not resume ([db.ErrNotFound]).
func (c *Client) Resume(ctx context.Context, id int64, raise Budget) (State, error) {
	steps, effects, money, _, _, parallel := raise.Args()
	duration, refusals := raise.Extra()
	r, err := queries.RunResume(ctx, c.pool, dbsqlc.RunResumeParams{ID: id, MaxSteps: steps, MaxEffects: effects, MaxMoney: money,
		MaxParallel: parallel, Actor: string(c.actor), Now: c.clock.Now(), MaxDuration: duration, MaxRefusals: refusals})
	if err != nil {
		return State{}, db.Translate(err, "budget.resume", "run", id)
	}
	s := State{RunID: r.ID, Status: r.Status, Spent: Spent{Effects: r.SpentEffects, Money: r.SpentMoney}}
	if r.Exhausted != nil {
		s.Exhausted = *r.Exhausted
	}
	s.Budget = FromRow(r.MaxSteps, r.MaxEffects, r.MaxMoney, r.Currency, r.MaxCall, r.MaxParallel)
	return s, nil
}

// FromRow is the budget of a run's columns.
func FromRow(steps *int32, effects, money *int64, currency *string, call *int64, parallel *int32) Budget {
	var b Budget
	if steps != nil {
		b.MaxSteps = int(*steps)
	}
	if effects != nil {
		b.MaxEffects = *effects
	}
	if money != nil && currency != nil {
		b.MaxMoney = Money{Amount: *money, Currency: *currency}
	}
	if call != nil {
		b.MaxCall = *call
	}
	if parallel != nil {
		b.MaxParallel = int(*parallel)
	}
	return b
}
