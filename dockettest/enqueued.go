package dockettest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// EnqueuedOpts are what a job must also have to match, besides its kind and
// payload schema. Every field set must match (an AND); a zero field is not
// checked.
type EnqueuedOpts struct {
	Queue          string
	Priority       int
	State          jobs.State
	LaneID         int64
	CaseID         int64
	IdempotencyKey string
	MaxAttempts    int
	// AvailableAt is compared at PostgreSQL's microsecond precision.
	AvailableAt time.Time
}

// mismatches lists how j differs from o, one "field is X, want Y" each.
func (o *EnqueuedOpts) mismatches(j jobs.Job) []string {
	if o == nil {
		return nil
	}
	var out []string
	differ := func(field string, got, want any) {
		out = append(out, fmt.Sprintf("%s is %v, want %v", field, got, want))
	}
	if o.Queue != "" && j.Queue != o.Queue {
		differ("queue", quote(j.Queue), quote(o.Queue))
	}
	if o.Priority != 0 && j.Priority != o.Priority {
		differ("priority", j.Priority, o.Priority)
	}
	if o.State != "" && j.State != o.State {
		differ("state", j.State, o.State)
	}
	if o.LaneID != 0 && j.LaneID != o.LaneID {
		differ("lane", j.LaneID, o.LaneID)
	}
	if o.CaseID != 0 && j.CaseID != o.CaseID {
		differ("case", j.CaseID, o.CaseID)
	}
	if o.IdempotencyKey != "" && j.IdempotencyKey != o.IdempotencyKey {
		differ("idempotency key", quote(j.IdempotencyKey), quote(o.IdempotencyKey))
	}
	if o.MaxAttempts != 0 && j.MaxAttempts != o.MaxAttempts {
		differ("max attempts", j.MaxAttempts, o.MaxAttempts)
	}
	if !o.AvailableAt.IsZero() && !j.AvailableAt.Equal(o.AvailableAt.Truncate(time.Microsecond)) {
		differ("available at", j.AvailableAt.Format(time.RFC3339Nano), o.AvailableAt.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano))
	}
	return out
}

// filter is what listing asks the database for: the fields jobs.Filter
// takes.
func (o *EnqueuedOpts) filter(kind string) jobs.Filter {
	f := jobs.Filter{Kind: kind, Limit: db.MaxPage}
	if o != nil {
		f.Queue, f.State = o.Queue, o.State
	}
	return f
}

// RequireEnqueued is [RequireEnqueuedTx] on committed jobs, read on c's
// pool.
func RequireEnqueued[T any](ctx context.Context, t testing.TB, c *jobs.Client, kind jobs.Kind[T], opts *EnqueuedOpts) *jobs.Typed[T] {
	t.Helper()
	return requireEnqueued(ctx, t, reader{c: c}, kind, opts)
}

// RequireEnqueuedTx fails the test unless exactly one job of kind (its name
// and payload schema) matching opts is visible in tx, in c's project and to
// c's actor, and returns that job with its payload decoded as T. tx sees
// what it has written and not yet committed, so call it after the code
// under test enqueued in tx and before tx commits or rolls back; it writes
// nothing, and a job written in a transaction that rolled back is not
// there.
//
// When several jobs of kind are there, opts must single one out; when one
// is there but differs from opts, the failure names each field that
// differs. A payload that does not decode as T fails the test too.
func RequireEnqueuedTx[T any](ctx context.Context, t testing.TB, c *jobs.Client, tx pgx.Tx, kind jobs.Kind[T], opts *EnqueuedOpts) *jobs.Typed[T] {
	t.Helper()
	return requireEnqueued(ctx, t, reader{c: c, tx: tx}, kind, opts)
}

func requireEnqueued[T any](ctx context.Context, t testing.TB, r reader, kind jobs.Kind[T], opts *EnqueuedOpts) *jobs.Typed[T] {
	t.Helper()
	all := r.ofKind(ctx, t, kind.Name(), kind.Schema(), nil)
	var found []jobs.Job
	for _, j := range all {
		if len(opts.mismatches(j)) == 0 {
			found = append(found, j)
		}
	}
	switch {
	case len(found) == 1:
		typed, err := kind.Decode(found[0])
		if err != nil {
			t.Fatalf("dockettest: job %d of kind %s: %v", found[0].ID, kind.Name(), err)
		}
		return typed
	case len(all) == 0:
		t.Fatalf("dockettest: no job of kind %s (payload schema %d) in project %s visible to %s", kind.Name(), kind.Schema(), r.c.Project(), r.c.Actor())
	case len(found) == 0 && len(all) == 1:
		t.Fatalf("dockettest: job %d of kind %s does not match: %s", all[0].ID, kind.Name(), strings.Join(opts.mismatches(all[0]), "; "))
	case len(found) == 0:
		t.Fatalf("dockettest: none of %d jobs of kind %s matches the options: %s", len(all), kind.Name(), describe(all, opts))
	default:
		t.Fatalf("dockettest: %d jobs of kind %s match, want one: %s (use RequireManyEnqueued, or options that single one out)",
			len(found), kind.Name(), describe(found, nil))
	}
	return nil
}

// RequireNotEnqueued is [RequireNotEnqueuedTx] on committed jobs, read on
// c's pool.
func RequireNotEnqueued[T any](ctx context.Context, t testing.TB, c *jobs.Client, kind jobs.Kind[T], opts *EnqueuedOpts) {
	t.Helper()
	requireNotEnqueued(ctx, t, reader{c: c}, kind, opts)
}

// RequireNotEnqueuedTx fails the test if a job of kind matching every field
// set in opts is visible in tx, in c's project and to c's actor; a job
// that differs from opts in any field set is no match. It reads in tx and
// writes nothing: it sees what tx has not yet committed, so it can show
// that code enqueued nothing before tx commits or rolls back.
func RequireNotEnqueuedTx[T any](ctx context.Context, t testing.TB, c *jobs.Client, tx pgx.Tx, kind jobs.Kind[T], opts *EnqueuedOpts) {
	t.Helper()
	requireNotEnqueued(ctx, t, reader{c: c, tx: tx}, kind, opts)
}

func requireNotEnqueued[T any](ctx context.Context, t testing.TB, r reader, kind jobs.Kind[T], opts *EnqueuedOpts) {
	t.Helper()
	var found []jobs.Job
	for _, j := range r.ofKind(ctx, t, kind.Name(), kind.Schema(), opts) {
		if len(opts.mismatches(j)) == 0 {
			found = append(found, j)
		}
	}
	if len(found) > 0 {
		t.Fatalf("dockettest: want no job of kind %s matching the options, found %d: %s", kind.Name(), len(found), describe(found, nil))
	}
}

// Expected is one job [RequireManyEnqueued] expects: its kind, its payload
// schema, and what else it must have. Make one with [Expect].
type Expected struct {
	Kind   string
	Schema int
	Opts   *EnqueuedOpts
}

// Expect returns the expectation of a job of kind, at kind's payload schema,
// matching opts (nil: any).
func Expect[T any](kind jobs.Kind[T], opts *EnqueuedOpts) Expected {
	return Expected{Kind: kind.Name(), Schema: kind.Schema(), Opts: opts}
}

// RequireManyEnqueued is [RequireManyEnqueuedTx] on committed jobs, read on
// c's pool.
func RequireManyEnqueued(ctx context.Context, t testing.TB, c *jobs.Client, expected []Expected) []jobs.Job {
	t.Helper()
	return requireManyEnqueued(ctx, t, reader{c: c}, expected)
}

// RequireManyEnqueuedTx fails the test unless the jobs visible in tx (in
// c's project, to c's actor) of the kinds expected names are, in the order
// they were enqueued (by id), exactly as many as expected and each of the
// kind, payload schema and options of its expectation: a kind enqueued
// twice is expected twice. Jobs of other kinds are left out. It returns the
// jobs, in that order. It reads in tx and writes nothing: it sees what tx
// has not yet committed, before tx commits or rolls back.
func RequireManyEnqueuedTx(ctx context.Context, t testing.TB, c *jobs.Client, tx pgx.Tx, expected []Expected) []jobs.Job {
	t.Helper()
	return requireManyEnqueued(ctx, t, reader{c: c, tx: tx}, expected)
}

func requireManyEnqueued(ctx context.Context, t testing.TB, r reader, expected []Expected) []jobs.Job {
	t.Helper()
	if len(expected) == 0 {
		t.Fatal("dockettest: RequireManyEnqueued needs at least one expected job")
	}
	var kinds []string
	for _, e := range expected {
		if e.Kind == "" {
			t.Fatal("dockettest: an expected job has no kind: make expectations with dockettest.Expect")
		}
		if !slices.Contains(kinds, e.Kind) {
			kinds = append(kinds, e.Kind)
		}
	}
	var got []jobs.Job
	for _, k := range kinds {
		got = append(got, r.ofKind(ctx, t, k, 0, nil)...)
	}
	slices.SortFunc(got, func(a, b jobs.Job) int { return cmp.Compare(a.ID, b.ID) })

	var problems []string
	for i := range max(len(got), len(expected)) {
		switch {
		case i >= len(got):
			problems = append(problems, fmt.Sprintf("#%d: want a job of kind %s, found none", i+1, expected[i].Kind))
		case i >= len(expected):
			problems = append(problems, fmt.Sprintf("#%d: job %d of kind %s is not expected", i+1, got[i].ID, got[i].Kind))
		default:
			e, j := expected[i], got[i]
			switch {
			case j.Kind != e.Kind:
				problems = append(problems, fmt.Sprintf("#%d: job %d is of kind %s, want %s", i+1, j.ID, j.Kind, e.Kind))
			case e.Schema != 0 && j.PayloadSchema != e.Schema:
				problems = append(problems, fmt.Sprintf("#%d: job %d of kind %s has payload schema %d, want %d", i+1, j.ID, j.Kind, j.PayloadSchema, e.Schema))
			default:
				for _, m := range e.Opts.mismatches(j) {
					problems = append(problems, fmt.Sprintf("#%d: job %d of kind %s: %s", i+1, j.ID, j.Kind, m))
				}
			}
		}
	}
	if len(problems) > 0 {
		t.Fatalf("dockettest: the jobs of kinds %s are not as expected:\n\t%s\nfound: %s",
			strings.Join(kinds, ", "), strings.Join(problems, "\n\t"), describe(got, nil))
	}
	return got
}

// reader reads jobs through c's API: on tx when it is set, else on c's
// pool.
type reader struct {
	c  *jobs.Client
	tx pgx.Tx
}

// ofKind returns every job of kind (and of payload schema schema, unless 0)
// visible to the reader, narrowed in the database by the queue and state of
// opts, oldest first. It fails t if listing fails.
func (r reader) ofKind(ctx context.Context, t testing.TB, kind string, schema int, opts *EnqueuedOpts) []jobs.Job {
	t.Helper()
	if r.c == nil {
		t.Fatal("dockettest: the jobs client is nil")
	}
	f := opts.filter(kind)
	var out []jobs.Job
	for {
		var page []jobs.Job
		var err error
		if r.tx != nil {
			page, err = r.c.ListTx(ctx, r.tx, f)
		} else {
			page, err = r.c.List(ctx, f)
		}
		if err != nil {
			t.Fatalf("dockettest: list jobs of kind %s: %v", kind, err)
		}
		for _, j := range page {
			if schema == 0 || j.PayloadSchema == schema {
				out = append(out, j)
			}
		}
		if len(page) < f.Limit {
			break
		}
		f.Before = page[len(page)-1].ID
	}
	slices.Reverse(out) // listed newest first
	return out
}

// describe lists jobs briefly for a failure, with how each differs from
// opts when opts is set.
func describe(js []jobs.Job, opts *EnqueuedOpts) string {
	parts := make([]string, len(js))
	for i, j := range js {
		parts[i] = fmt.Sprintf("job %d (%s@%d, queue %s, priority %d, %s)", j.ID, j.Kind, j.PayloadSchema, j.Queue, j.Priority, j.State)
		if m := opts.mismatches(j); len(m) > 0 {
			parts[i] += ": " + strings.Join(m, ", ")
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
