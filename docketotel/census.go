package docketotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/jobs"
	"github.com/docket-dev/docket/internal/newclient"
	"github.com/docket-dev/docket/internal/telemetry"
	"github.com/docket-dev/docket/jobs"
)

// The census's gauges, by name: unfinished jobs by project, queue and state,
// and of the queued ones those due now.
const (
	MetricJobs    = telemetry.MetricJobs
	MetricJobsDue = telemetry.MetricJobsDue
)

var queries = dbsqlc.New()

// CensusConfig configures a [Census].
type CensusConfig struct {
	// Actor is whom the census reads as: it counts the jobs of the projects
	// where the actor may read jobs (holds a job capability). Required.
	Actor access.Actor
	// MeterProvider receives the gauges. Required.
	MeterProvider metric.MeterProvider
	// Clock gives the instant "due" is decided by. Defaults to
	// [db.SystemClock].
	Clock db.Clock
	// Timeout bounds one read, so a slow database never stalls a
	// collection. Defaults to 5 s.
	Timeout time.Duration
}

// Count is the number of unfinished jobs of one project and queue in one
// state.
type Count struct {
	Project string
	Queue   string
	State   jobs.State // Queued, Claimed or Uncertain
	Jobs    int64
	Due     int64 // of queued jobs, those available now; 0 for the other states
}

// Census reports the unfinished jobs of every project its actor may read,
// by queue and state, as the gauges docket.jobs (attributes docket.project,
// docket.queue, docket.job.state) and docket.jobs.due (docket.project,
// docket.queue): read from the database at every collection of its meter,
// in one statement. A series whose jobs are all gone reads 0 from then on.
// Finished jobs are not counted (the workers count outcomes as they happen:
// see docs/telemetry.md). It is safe for concurrent use.
type Census struct {
	pool    db.Pool
	actor   access.Actor
	clock   db.Clock
	timeout time.Duration
	reg     metric.Registration

	mu   sync.Mutex
	seen map[Count]bool // the series reported so far, Jobs and Due zero
}

// NewCensus registers the census's gauges with cfg.MeterProvider, reading on
// pool. It refuses, with [db.ErrInvalidArgument], a nil pool or provider, a
// malformed actor, a negative timeout, or a provider that refuses the
// gauges. It reads nothing until the first collection. Close unregisters
// it.
func NewCensus(pool db.Pool, cfg CensusConfig) (*Census, error) {
	const op = "docketotel.new_census"
	clock, err := newclient.Check(op, pool, cfg.Actor.Validate, cfg.Clock)
	if err != nil {
		return nil, err
	}
	if cfg.MeterProvider == nil {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "MeterProvider is nil")
	}
	if cfg.Timeout < 0 {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "timeout is negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	c := &Census{pool: pool, actor: cfg.Actor, clock: clock, timeout: cfg.Timeout, seen: map[Count]bool{}}
	m := cfg.MeterProvider.Meter(telemetry.Scope)
	jobsGauge, err := m.Int64ObservableGauge(MetricJobs, metric.WithUnit("{job}"),
		metric.WithDescription("Unfinished jobs by project, queue and state (queued, claimed, uncertain), read from the database."))
	if err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, op, err.Error())
	}
	dueGauge, err := m.Int64ObservableGauge(MetricJobsDue, metric.WithUnit("{job}"),
		metric.WithDescription("Queued jobs available now, by project and queue, read from the database."))
	if err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, op, err.Error())
	}
	c.reg, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		counts, err := c.read(ctx)
		if err != nil {
			return err
		}
		for _, n := range counts {
			where := attribute.NewSet(telemetry.KeyProject.String(n.Project), telemetry.KeyQueue.String(n.Queue))
			o.ObserveInt64(jobsGauge, n.Jobs, metric.WithAttributes(telemetry.KeyProject.String(n.Project),
				telemetry.KeyQueue.String(n.Queue), telemetry.KeyState.String(string(n.State))))
			if n.State == jobs.Queued {
				o.ObserveInt64(dueGauge, n.Due, metric.WithAttributeSet(where))
			}
		}
		return nil
	}, jobsGauge, dueGauge)
	if err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, op, err.Error())
	}
	return c, nil
}

// Read returns the census now: a count for every (project, queue, state)
// that has jobs, or had when an earlier read or collection reported it (as
// 0 now), in no particular order.
func (c *Census) Read(ctx context.Context) ([]Count, error) { return c.read(ctx) }

func (c *Census) read(ctx context.Context) ([]Count, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rows, err := queries.JobCensus(ctx, c.pool, string(c.actor), c.clock.Now())
	if err != nil {
		return nil, db.Translate(err, "docketotel.census")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Count, 0, len(rows)+len(c.seen))
	now := map[Count]bool{}
	for _, r := range rows {
		n := Count{Project: r.Project, Queue: r.Queue, State: jobs.State(r.State), Jobs: r.Jobs, Due: r.Due}
		out = append(out, n)
		key := Count{Project: n.Project, Queue: n.Queue, State: n.State}
		now[key], c.seen[key] = true, true
	}
	for key := range c.seen {
		if !now[key] {
			out = append(out, key)
		}
	}
	return out, nil
}

// Close unregisters the census's gauges.
func (c *Census) Close() error { return c.reg.Unregister() }
