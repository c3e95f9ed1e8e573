package batches

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/batches"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/plans"
)

var queries = dbsqlc.New()

// MaxPage is the most items one page admits.
const MaxPage = 1000

// Status is where a batch is: running, or completed.
type Status string

const (
	Running   Status = "running"
	Completed Status = "completed"
)

// ItemStatus is where an item is.
type ItemStatus string

const (
	Reserved    ItemStatus = "reserved"
	Succeeded   ItemStatus = "succeeded"
	Failed      ItemStatus = "failed"
	Quarantined ItemStatus = "quarantined"
)

// Config configures a [Client].
type Config struct {
	// Actor needs batch.run, plan.run and job.create on the project. Required.
	Actor access.Actor
	// Clock defaults to [db.SystemClock].
	Clock db.Clock
	// Known and Limits validate the plan, as plans.Config's do.
	Known  func(kind string) bool
	Limits plans.Limits
}

// Client opens, feeds and reads batches, as one actor. It is safe for
// concurrent use.
type Client struct {
	pool   db.Pool
	actor  access.Actor
	clock  db.Clock
	known  func(string) bool
	limits plans.Limits
}

// NewClient returns a client on pool. It refuses, with
// [db.ErrInvalidArgument], a nil pool or a malformed actor.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("batches.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, actor: cfg.Actor, clock: clock, known: cfg.Known, limits: cfg.Limits}, nil
}

// Report is a batch and its census.
type Report struct {
	ID      int64
	Project string
	Name    string
	Digest  string
	Status  Status
	// LastKey is the greatest key admitted; Cursor the greatest key such
	// that it and every key before it settled ("" for none).
	LastKey, Cursor string
	SourceDone      bool
	Items, InFlight int
	Succeeded       int
	Failed          int
	Quarantined     int
	// Exhausted is how many of the items in flight have a run stopped at
	// a ceiling: they wait for a raise (or a cancel), not for a worker.
	Exhausted int
	// ItemBudget is the ceilings each item's run gets ([ItemBudget]).
	ItemBudget budgets.Budget
	CreatedBy  access.Actor
	CreatedAt  time.Time
	FinishedAt *time.Time
}

// NeedsAttention reports whether a person has something to act on: items
// in flight (running, stuck, or left by a crash), exhausted at a ceiling,
// failed or quarantined. It reads the counts, not the status: a windowed
// pass is running on every correct use, and a pass whose items all
// settled needs nothing, while a batch read to its end with one item
// still in flight is not finished with.
func (r Report) NeedsAttention() bool {
	return r.InFlight > 0 || r.Exhausted > 0 || r.Failed > 0 || r.Quarantined > 0
}

// OpenOption is an option of [Client.Open].
type OpenOption func(*openOptions) error

type openOptions struct {
	itemBudget budgets.Budget
}

// ItemBudget gives each item's run its own ceilings, b (see package
// budgets): an item is its own run with its own budget, so one item at a
// ceiling is exhausted alone. The batch records them; opening it again
// with other ceilings is refused. A budget that does not validate is
// refused with [db.ErrInvalidArgument] by Open.
func ItemBudget(b budgets.Budget) OpenOption {
	return func(o *openOptions) error {
		if err := b.Validate(); err != nil {
			return err
		}
		o.itemBudget = b
		return nil
	}
}

// Open opens batch name of project over plan p, or resumes it: opening
// again a batch of that name with the same plan (and item ceilings,
// [ItemBudget]) returns it. It refuses a plan that does not validate (a
// *plans.Invalid, [db.ErrInvalidArgument]), another plan than the batch
// was opened with ([db.ErrInvalidArgument], naming both digests), other
// item ceilings or ones that do not validate ([db.ErrInvalidArgument]),
// and an actor without batch.run, plan.run and job.create
// ([db.ErrNotPermitted]).
func (c *Client) Open(ctx context.Context, project, name string, p plans.Plan, opts ...OpenOption) (Report, error) {
	const op = "batch.open"
	var o openOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return Report{}, err
		}
	}
	if err := plans.Check(p, c.known, c.limits); err != nil {
		return Report{}, err
	}
	steps, effects, money, currency, call, parallel := o.itemBudget.Args()
	duration, refusals := o.itemBudget.Extra()
	b, err := queries.BatchOpen(ctx, c.pool, dbsqlc.BatchOpenParams{Project: project, Name: name, Digest: plans.Digest(p),
		Canonical: string(plans.Canonical(p)), MaxSteps: steps, MaxEffects: effects, MaxMoney: money, Currency: currency,
		MaxCall: call, MaxParallel: parallel, MaxDuration: duration, MaxRefusals: refusals,
		Actor: string(c.actor), Now: c.clock.Now()})
	if err != nil {
		return Report{}, db.Translate(err, op, "project", project, "batch", name)
	}
	return c.Get(ctx, b.ID)
}

// Get returns batch id's report, or [db.ErrNotFound] when there is none or
// the actor holds neither batch.run nor case.view on its project. The
// census is read from the batch's maintained counts: one row, however many
// items.
func (c *Client) Get(ctx context.Context, id int64) (Report, error) {
	r, err := queries.BatchGet(ctx, c.pool, id, string(c.actor))
	if err != nil {
		return Report{}, db.TranslateRead(err, "batch.get", "batch", id, string(c.actor))
	}
	return fromRow(r), nil
}

// fromRow is the report of batch r, as read.
func fromRow(r *dbsqlc.BatchGetRow) Report {
	return Report{ID: r.ID, Project: r.Project, Name: r.Name, Digest: r.Digest, Status: Status(r.Status),
		LastKey: deref(r.LastKey), Cursor: deref(r.Cursor), SourceDone: r.SourceDone, Items: int(r.Items),
		InFlight: int(r.InFlight), Succeeded: int(r.Succeeded), Failed: int(r.Failed), Quarantined: int(r.Quarantined),
		Exhausted: int(r.Exhausted), ItemBudget: itemBudget(r),
		CreatedBy: access.Actor(r.CreatedBy), CreatedAt: r.CreatedAt.UTC(), FinishedAt: r.FinishedAt}
}

// itemBudget is the ceilings batch r gives each item's run.
func itemBudget(r *dbsqlc.BatchGetRow) budgets.Budget {
	b := budgets.FromRow(r.ItemMaxSteps, r.ItemMaxEffects, r.ItemMaxMoney, r.ItemCurrency, r.ItemMaxCall, r.ItemMaxParallel)
	if r.ItemMaxDuration != nil {
		b.MaxDuration = *r.ItemMaxDuration
	}
	if r.ItemMaxRefusals != nil {
		b.MaxRefusals = int(*r.ItemMaxRefusals)
	}
	return b
}

// Item is one item a source offers: its key, its run's input, and whether
// the source vouches for it (trusted).
type Item struct {
	Key     string
	Input   json.RawMessage
	Trusted bool
}

// Admitted is an item as stored.
type Admitted struct {
	Key     string
	Status  ItemStatus
	RunID   int64 // the run reserved for it; 0 when quarantined
	Trusted bool
	Reason  string
	// ReservedNow is false when the item was reserved before (a resume
	// offering it again).
	ReservedNow bool
	AdmittedAt  time.Time
	SettledAt   *time.Time
}

// Admit admits a page of items to batch id, in one transaction: keys in
// strictly increasing byte order; last says the page ends the source. A key
// the batch has returns its item and run, reserving nothing; a new key
// must come after the last admitted. It refuses, admitting nothing: more
// than [MaxPage] items, a key out of order or a new key inside what was
// admitted ([db.ErrInvalidArgument], naming the key); a batch the actor
// may not run ([db.ErrNotFound]); a completed batch ([db.ErrTerminal]).
func (c *Client) Admit(ctx context.Context, id int64, page []Item, last bool) ([]Admitted, error) {
	const op = "batch.admit"
	if len(page) > MaxPage {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("a page of %d items: want at most %d", len(page), MaxPage), "batch", id)
	}
	keys, inputs, trusted := make([]string, len(page)), make([]json.RawMessage, len(page)), make([]bool, len(page))
	for i, it := range page {
		keys[i], trusted[i] = it.Key, it.Trusted
		inputs[i] = it.Input
		if len(it.Input) == 0 {
			inputs[i] = json.RawMessage(`{}`)
		}
	}
	rows, err := queries.BatchAdmit(ctx, c.pool, dbsqlc.BatchAdmitParams{ID: id, Keys: keys, Inputs: inputs, Trusted: trusted,
		Last: last, Actor: string(c.actor), Now: c.clock.Now()})
	if err != nil {
		return nil, db.Translate(err, op, "batch", id)
	}
	out := make([]Admitted, len(rows))
	for i, r := range rows {
		out[i] = Admitted{Key: r.Key, Status: ItemStatus(r.Status), RunID: deref(r.RunID), Trusted: r.Trusted,
			Reason: deref(r.Reason), ReservedNow: r.ReservedNow, AdmittedAt: r.AdmittedAt.UTC(), SettledAt: r.SettledAt}
	}
	return out, nil
}

// NeedingAttention returns up to limit (1..1000) items of batch id nobody
// is finished with — failed, quarantined, and reserved with no outcome yet
// — oldest key first, after key after ("" from the start).
func (c *Client) NeedingAttention(ctx context.Context, id int64, after string, limit int) ([]Admitted, error) {
	var a *string
	if after != "" {
		a = &after
	}
	rows, err := queries.BatchAttention(ctx, c.pool, id, a, int32(limit), string(c.actor))
	if err != nil {
		return nil, db.Translate(err, "batch.attention", "batch", id)
	}
	out := make([]Admitted, len(rows))
	for i, r := range rows {
		out[i] = Admitted{Key: r.Key, Status: ItemStatus(r.Status), RunID: deref(r.RunID), Trusted: r.Trusted,
			Reason: deref(r.Reason), AdmittedAt: r.AdmittedAt.UTC(), SettledAt: r.SettledAt}
	}
	return out, nil
}

// Source pages the items of a batch: Page returns up to limit items with
// keys after after ("" from the start) in strictly increasing byte order,
// and whether that reached the source's end.
type Source interface {
	Page(ctx context.Context, after string, limit int) (items []Item, end bool, err error)
}

// Run feeds batch id from src, in pages of up to pageSize items (0: 100),
// from its cursor on: items the batch has are offered again and return
// their runs, new ones are reserved. It stops after admitting maxItems new
// items (0: no limit), or when the source ends, and returns the report: a
// windowed pass leaves the batch running; the runs proceed on the workers.
func (c *Client) Run(ctx context.Context, id int64, src Source, pageSize, maxItems int) (Report, error) {
	if pageSize <= 0 {
		pageSize = 100
	}
	pageSize = min(pageSize, MaxPage)
	r, err := c.Get(ctx, id)
	if err != nil {
		return Report{}, err
	}
	after, admitted := r.Cursor, 0
	for !r.SourceDone && (maxItems == 0 || admitted < maxItems) {
		limit := pageSize
		if maxItems > 0 {
			limit = min(limit, maxItems-admitted)
		}
		items, end, err := src.Page(ctx, after, limit)
		if err != nil {
			return Report{}, fmt.Errorf("batch %d: source after %q: %w", id, after, err)
		}
		got, err := c.Admit(ctx, id, items, end)
		if err != nil {
			return Report{}, err
		}
		for _, a := range got {
			if a.ReservedNow {
				admitted++
			}
		}
		if len(items) > 0 {
			after = items[len(items)-1].Key
		}
		if r, err = c.Get(ctx, id); err != nil {
			return Report{}, err
		}
		if end {
			break
		}
	}
	return r, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
