package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/retention"
	"github.com/docket-dev/docket/internal/newclient"
)

var queries = dbsqlc.New()

// Forever is the horizon of what is never pruned.
const Forever time.Duration = -1

// MinHorizon and MaxHorizon bound every horizon but [Forever].
const (
	MinHorizon = time.Second
	MaxHorizon = 36500 * 24 * time.Hour // 100 years of 365 days
)

// MaxBatch is the most items one prune run removes.
const MaxBatch = 10000

// Policy is how long a project's finished work stays: each horizon is
// counted from the moment the item finished (a job), was dead-lettered (a
// message), was due (an occurrence) or closed (a case), and is
// [MinHorizon] .. [MaxHorizon] or [Forever].
type Policy struct {
	// SucceededJobs: succeeded and cancelled jobs of no case.
	SucceededJobs time.Duration
	// FailedJobs: failed and dead jobs of no case.
	FailedJobs time.Duration
	// Messages: dead-lettered messages no case took. A case's messages go
	// with the case.
	Messages time.Duration
	// Occurrences: schedule occurrences; the job an occurrence enqueued
	// stays as long as the occurrence, whatever the job horizons say.
	Occurrences time.Duration
	// ClosedCases: closed cases, with everything bound to them (their jobs
	// too, whatever the job horizons say).
	ClosedCases time.Duration
}

// Defaults is the policy of a project that set none.
var Defaults = Policy{
	SucceededJobs: 7 * 24 * time.Hour,
	FailedJobs:    30 * 24 * time.Hour,
	Messages:      30 * 24 * time.Hour,
	Occurrences:   30 * 24 * time.Hour,
	ClosedCases:   90 * 24 * time.Hour,
}

// Validate refuses, with [db.ErrInvalidArgument] naming the field, a
// horizon outside [MinHorizon] .. [MaxHorizon] that is not [Forever].
func (p Policy) Validate() error {
	for _, h := range []struct {
		name string
		d    time.Duration
	}{{"SucceededJobs", p.SucceededJobs}, {"FailedJobs", p.FailedJobs}, {"Messages", p.Messages},
		{"Occurrences", p.Occurrences}, {"ClosedCases", p.ClosedCases}} {
		if h.d != Forever && (h.d < MinHorizon || h.d > MaxHorizon) {
			return db.Refuse(db.ErrInvalidArgument, "retention.set", fmt.Sprintf(
				"invalid horizon %s = %v: want %v .. %v, or Forever", h.name, h.d, MinHorizon, MaxHorizon))
		}
	}
	return nil
}

// Config configures a [Client].
type Config struct {
	// Actor is who the client acts as; its grants decide what it may do and
	// see. Required.
	Actor access.Actor
	// Clock gives the instants the client passes to the database. Defaults
	// to [db.SystemClock].
	Clock db.Clock
}

// Client sets and reads retention policies, runs prunes and reads their
// records, as one actor. It is safe for concurrent use.
type Client struct {
	pool  db.Pool
	actor access.Actor
	clock db.Clock
}

// NewClient returns a client on pool. It refuses, with
// [db.ErrInvalidArgument], a nil pool or a malformed actor.
func NewClient(pool db.Pool, cfg Config) (*Client, error) {
	clock, err := newclient.Check("retention.new_client", pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, actor: cfg.Actor, clock: clock}, nil
}

// Set replaces project's policy, in its own transaction. See [Client.SetTx].
func (c *Client) Set(ctx context.Context, project string, p Policy) (Policy, error) {
	return c.set(ctx, c.pool, project, p)
}

// SetTx replaces project's policy with p in tx and returns it; the change is
// recorded in docket.retention_events. Both commit or roll back with tx. It
// refuses, writing nothing: a
// horizon out of range or a malformed project ([db.ErrInvalidArgument]); an
// unknown project or an actor without retention.manage on it
// ([db.ErrNotPermitted]).
func (c *Client) SetTx(ctx context.Context, tx pgx.Tx, project string, p Policy) (Policy, error) {
	return c.set(ctx, tx, project, p)
}

func (c *Client) set(ctx context.Context, q db.DBTX, project string, p Policy) (Policy, error) {
	const op = "retention.set"
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	r, err := queries.RetentionSet(ctx, q, dbsqlc.RetentionSetParams{
		Project: project, JobsSucceeded: horizonArg(p.SucceededJobs), JobsFailed: horizonArg(p.FailedJobs),
		Messages: horizonArg(p.Messages), Occurrences: horizonArg(p.Occurrences), Cases: horizonArg(p.ClosedCases),
		Actor: string(c.actor), Now: c.clock.Now(),
	})
	if err != nil {
		return Policy{}, db.Translate(err, op, "project", project)
	}
	return policy(r.JobsSucceeded, r.JobsFailed, r.Messages, r.Occurrences, r.Cases), nil
}

// Get returns the policy project keeps now, its own or [Defaults], and
// whether it set one. An actor holding neither retention.manage nor
// retention.prune on project, or an unknown project, is [db.ErrNotFound].
func (c *Client) Get(ctx context.Context, project string) (p Policy, set bool, err error) {
	r, err := queries.RetentionGet(ctx, c.pool, project, string(c.actor))
	if err != nil {
		return Policy{}, false, db.Translate(err, "retention.get", "project", project)
	}
	return policy(r.JobsSucceeded, r.JobsFailed, r.Messages, r.Occurrences, r.Cases), r.Explicit, nil
}

func horizonArg(d time.Duration) *time.Duration {
	if d == Forever {
		return nil
	}
	return &d
}

func horizon(micros int64) time.Duration {
	if micros == 0 {
		return Forever
	}
	return time.Duration(micros) * time.Microsecond
}

func policy(succeeded, failed, messages, occurrences, cases int64) Policy {
	return Policy{SucceededJobs: horizon(succeeded), FailedJobs: horizon(failed), Messages: horizon(messages),
		Occurrences: horizon(occurrences), ClosedCases: horizon(cases)}
}

// Prune is the record one prune left of what it removed from one project:
// a row of docket.prunes, written before anything was deleted.
type Prune struct {
	ID      int64
	Project string
	Actor   access.Actor
	At      time.Time
	// Policy is the policy it applied.
	Policy Policy
	// Jobs it removed (those of its cases too): how many, their ids as
	// ranges ("{[1,5),[7,8)}"), how many in each state, their events, and
	// when the first and the last of them finished.
	Jobs         int
	JobIDs       string
	JobStates    map[string]int
	JobEvents    int
	FinishedFrom *time.Time
	FinishedTo   *time.Time
	// Digest is sha256 over the removed jobs' chain heads (see
	// [ChainDigest]); nil when it removed no job.
	Digest []byte
	// Cases it removed, with what was bound to them.
	Cases       int
	CaseIDs     string
	CaseEvents  int
	CaseKeys    int
	Obligations int
	Timers      int
	Waits       int
	// Messages of its cases, and dead-lettered ones no case took.
	Messages   int
	MessageIDs string
	// Occurrences of schedules whose jobs it removed.
	Occurrences int
	// KeptUnverified jobs were past their horizon but kept, because their
	// history did not verify (jobs.Client.Verify says why); FirstUnverified
	// is the first of them.
	KeptUnverified  int
	FirstUnverified *int64
}

// Removed is how many items the prune removed: jobs, cases and messages.
func (p Prune) Removed() int { return p.Jobs + p.Cases + p.Messages }

// pruneRow is the shape every query of docket.prunes returns.
type pruneRow = dbsqlc.PruneRunRow

func fromPruneRow(r *pruneRow) (Prune, error) {
	p := Prune{
		ID: r.ID, Project: r.Project, Actor: access.Actor(r.Actor), At: r.At.UTC(),
		Jobs: int(r.Jobs), JobIDs: r.JobIds, JobEvents: int(r.JobEvents),
		FinishedFrom: r.FinishedFrom, FinishedTo: r.FinishedTo, Digest: r.JobsDigest,
		Cases: int(r.Cases), CaseIDs: r.CaseIds, CaseEvents: int(r.CaseEvents), CaseKeys: int(r.CaseKeys),
		Obligations: int(r.Obligations), Timers: int(r.Timers), Waits: int(r.Waits),
		Messages: int(r.Messages), MessageIDs: r.MessageIds, Occurrences: int(r.Occurrences),
		KeptUnverified: int(r.KeptUnverified), FirstUnverified: r.FirstUnverified,
	}
	if err := json.Unmarshal(r.JobStates, &p.JobStates); err != nil {
		return Prune{}, fmt.Errorf("prune %d: job states: %w", r.ID, err)
	}
	var h map[string]*int64
	if err := json.Unmarshal(r.Horizons, &h); err != nil {
		return Prune{}, fmt.Errorf("prune %d: horizons: %w", r.ID, err)
	}
	micros := func(k string) int64 {
		if v := h[k]; v != nil {
			return *v
		}
		return 0
	}
	p.Policy = policy(micros("jobs_succeeded"), micros("jobs_failed"), micros("messages"), micros("occurrences"), micros("cases"))
	return p, nil
}
