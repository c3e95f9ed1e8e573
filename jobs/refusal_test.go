package jobs_test

// Refusals: bad input gets a typed error and writes nothing. Each table runs
// against one seeded database (a queued job with an idempotency key, a held
// lease, an uncertain job), and every case shows, by snapshot, that the
// refusal left every job and event as it was. A wrongly accepted call would
// show too: the queued job is claimable from the default queue, the lease is
// live, the uncertain job can be reconciled.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// rfClaimer holds job.claim and nothing else on acme.
const rfClaimer access.Actor = "svc:claimer"

// rfWorld is a seeded database for refusal tables.
type rfWorld struct {
	env
	queued    jobs.Job // queued in "default", idempotency key "seed-key"
	held      jobs.Job // claimed with a live lease
	uncertain jobs.Job // waiting for reconcile or cancel
	nobody    *jobs.Client
	claimer   *jobs.Client // job.claim only
	elsewhere *jobs.Client // app, in project "nope", which does not exist
	before    string       // the snapshot every refusal must leave
}

func rfSetup(t *testing.T) rfWorld {
	t.Helper()
	ctx := t.Context()
	w := rfWorld{env: setup(t)}
	w.Allow(t, testkit.Grants(rfClaimer, project, access.JobClaim)...)
	w.nobody = clientAs(t, w.API, w.Clock, nobody)
	w.claimer = clientAs(t, w.API, w.Clock, rfClaimer)
	var err error
	w.elsewhere, err = jobs.NewClient(w.API, jobs.Config{Project: "nope", Actor: app, Clock: w.Clock})
	require.NoError(t, err)

	held, err := w.client.Enqueue(ctx, spec(`{"seed": "held"}`))
	require.NoError(t, err)
	var ok bool
	w.held, ok, err = w.client.ClaimID(ctx, held.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)

	unsure, err := w.client.Enqueue(ctx, spec(`{"seed": "uncertain"}`))
	require.NoError(t, err)
	claimed, ok, err := w.client.ClaimID(ctx, unsure.Job.ID, jobs.ClaimOptions{})
	require.NoError(t, err)
	require.True(t, ok)
	w.uncertain, err = w.client.Fail(ctx, claimed.Lease(), jobs.Failure{Class: jobs.ClassUncertain, Diagnostic: "timed out"})
	require.NoError(t, err)
	require.Equal(t, jobs.Uncertain, w.uncertain.State)

	s := spec(`{"seed": "queued"}`)
	s.IdempotencyKey = "seed-key"
	queued, err := w.client.Enqueue(ctx, s)
	require.NoError(t, err)
	w.queued = queued.Job

	w.before = snapshot(t, w.Pool)
	return w
}

// refused asserts that call fails with want and leaves the seeded world as
// it was.
func (w rfWorld) refused(t *testing.T, want error, call func() error) {
	t.Helper()
	err := call()
	require.ErrorIs(t, err, want)
	var typed *db.Error
	require.ErrorAs(t, err, &typed, "a refusal is a *db.Error")
	require.Equal(t, w.before, snapshot(t, w.Pool), "a refusal changed something")
}

// rfGood is a valid spec that differs from every seeded one.
func rfGood(n int) jobs.Spec { return spec(fmt.Sprintf(`{"good": %d}`, n)) }

func TestEnqueueRefusesInvalidSpecs(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	// A JSON string of n bytes, quotes included.
	jsonString := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }

	cases := []struct {
		name   string
		edit   func(s *jobs.Spec)
		dbOnly bool // passes Spec.Validate; the database refuses it
	}{
		{"empty kind", func(s *jobs.Spec) { s.Kind = "" }, false},
		{"kind of 129 characters", func(s *jobs.Spec) { s.Kind = "k" + strings.Repeat("x", jobs.MaxKindLen) }, false},
		{"kind with a capital", func(s *jobs.Spec) { s.Kind = "Billing" }, false},
		{"kind with an empty segment", func(s *jobs.Spec) { s.Kind = "billing..x" }, false},
		{"kind with a space", func(s *jobs.Spec) { s.Kind = "billing invoice" }, false},
		{"kind starting with a digit", func(s *jobs.Spec) { s.Kind = "1x" }, false},
		{"kind with a trailing dot", func(s *jobs.Spec) { s.Kind = "billing." }, false},
		{"kind segment starting with a digit", func(s *jobs.Spec) { s.Kind = "billing.1x" }, false},
		{"kind with a slash", func(s *jobs.Spec) { s.Kind = "billing/invoice" }, false},
		{"queue of 64 characters", func(s *jobs.Spec) { s.Queue = "q" + strings.Repeat("x", 63) }, false},
		{"queue with a capital", func(s *jobs.Spec) { s.Queue = "Default" }, false},
		{"queue with a dot", func(s *jobs.Spec) { s.Queue = "billing.fast" }, false},
		{"queue with a space", func(s *jobs.Spec) { s.Queue = "fast lane" }, false},
		{"queue starting with a dash", func(s *jobs.Spec) { s.Queue = "-fast" }, false},
		{"queue starting with an underscore", func(s *jobs.Spec) { s.Queue = "_fast" }, false},
		{"payload one byte over the bound", func(s *jobs.Spec) { s.Payload = jsonString(jobs.MaxPayloadBytes + 1) }, true},
		{"payload of 3 MiB", func(s *jobs.Spec) { s.Payload = jsonString(3 * jobs.MaxPayloadBytes) }, true},
		{"payload over four times the bound", func(s *jobs.Spec) { s.Payload = jsonString(4*jobs.MaxPayloadBytes + 1) }, false},
		{"payload not JSON", func(s *jobs.Spec) { s.Payload = json.RawMessage(`{"invoice": `) }, false},
		{"payload two JSON values", func(s *jobs.Spec) { s.Payload = json.RawMessage(`{} {}`) }, false},
		{"payload nil", func(s *jobs.Spec) { s.Payload = nil }, false},
		{"payload empty", func(s *jobs.Spec) { s.Payload = json.RawMessage{} }, false},
		{"payload blank", func(s *jobs.Spec) { s.Payload = json.RawMessage("  ") }, false},
		{"payload schema negative", func(s *jobs.Spec) { s.PayloadSchema = -1 }, false},
		{"payload schema over 32 bits", func(s *jobs.Spec) { s.PayloadSchema = math.MaxInt32 + 1 }, false},
		{"max attempts -1", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{MaxAttempts: -1} }, false},
		{"max attempts 101", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{MaxAttempts: jobs.MaxAttemptsMax + 1} }, false},
		{"lease negative", func(s *jobs.Spec) { s.Lease = -time.Minute }, false},
		{"lease 999ms", func(s *jobs.Spec) { s.Lease = time.Second - time.Millisecond }, false},
		{"lease 24h and a second", func(s *jobs.Spec) { s.Lease = 24*time.Hour + time.Second }, false},
		{"backoff base negative", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Base: -time.Second} }, false},
		{"backoff base under 1ms", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Base: time.Microsecond} }, false},
		{"backoff base over 24h", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Base: 25 * time.Hour, Cap: 48 * time.Hour} }, false},
		{"backoff cap below base", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Base: time.Minute, Cap: time.Second} }, false},
		{"backoff cap over 7 days", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Cap: 8 * 24 * time.Hour} }, false},
		{"jitter 1.5", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Jitter: 1.5} }, false},
		{"jitter negative", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Jitter: -0.1} }, false},
		{"jitter NaN", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Jitter: math.NaN()} }, false},
		{"jitter +Inf", func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Jitter: math.Inf(1)} }, false},
		{"priority 5", func(s *jobs.Spec) { s.Priority = 5 }, false},
		{"priority -1", func(s *jobs.Spec) { s.Priority = -1 }, false},
		{"key with NUL", func(s *jobs.Spec) { s.IdempotencyKey = "invoice\x007" }, false},
		{"key with a newline", func(s *jobs.Spec) { s.IdempotencyKey = "invoice\n7" }, false},
		{"key with a tab", func(s *jobs.Spec) { s.IdempotencyKey = "invoice\t7" }, false},
		{"key with DEL", func(s *jobs.Spec) { s.IdempotencyKey = "invoice\x7f" }, false},
		{"key with a C1 control", func(s *jobs.Spec) { s.IdempotencyKey = "invoice\u00857" }, false},
		{"key of 256 characters", func(s *jobs.Spec) { s.IdempotencyKey = strings.Repeat("k", jobs.MaxKeyLen+1) }, false},
		{"key of 256 two-byte characters", func(s *jobs.Spec) { s.IdempotencyKey = strings.Repeat("é", jobs.MaxKeyLen+1) }, false},
		{"key not UTF-8", func(s *jobs.Spec) { s.IdempotencyKey = "invoice\xff" }, false},
		{"params an array", func(s *jobs.Spec) { s.Params = json.RawMessage(`[1, 2]`) }, false},
		{"params a string", func(s *jobs.Spec) { s.Params = json.RawMessage(`"x"`) }, false},
		{"params null", func(s *jobs.Spec) { s.Params = json.RawMessage(`null`) }, false},
		{"params not JSON", func(s *jobs.Spec) { s.Params = json.RawMessage(`{"a":`) }, false},
		{"params over 64 KiB", func(s *jobs.Spec) {
			s.Params = json.RawMessage(`{"a": "` + strings.Repeat("x", jobs.MaxParamsBytes) + `"}`)
		}, true},
		{"101 inputs", func(s *jobs.Spec) { s.Inputs = make([]string, jobs.MaxInputs+1) }, false},
		{"input over 1000 characters", func(s *jobs.Spec) { s.Inputs = []string{strings.Repeat("i", 1001)} }, false},
		{"requested output over 1000 characters", func(s *jobs.Spec) { s.Output.Asset = strings.Repeat("o", jobs.MaxOutputLen+1) }, false},
		{"requested output kind malformed", func(s *jobs.Spec) { s.Output = jobs.OutputRef{Asset: "a", Kind: "image png"} }, false},
		{"requested output kind over 128 characters", func(s *jobs.Spec) { s.Output = jobs.OutputRef{Asset: "a", Kind: strings.Repeat("k", 129)} }, false},
		{"target root malformed", func(s *jobs.Spec) { s.Output = jobs.OutputRef{Asset: "a", Root: "../etc"} }, false},
		{"requested output kind without an asset", func(s *jobs.Spec) { s.Output = jobs.OutputRef{Kind: "image/png"} }, false},
		{"target root without an asset", func(s *jobs.Spec) { s.Output = jobs.OutputRef{Root: "renders"} }, false},
		{"negative lane", func(s *jobs.Spec) { s.LaneID = -1 }, false},
		{"negative case", func(s *jobs.Spec) { s.CaseID = -1 }, false},
		{"bad compensation kind", func(s *jobs.Spec) { s.CompensationKind = "Undo" }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			bad := rfGood(0)
			tc.edit(&bad)
			if tc.dbOnly {
				require.NoError(t, bad.Validate(), "the database, not Go, refuses this one")
			} else {
				require.ErrorIs(t, bad.Validate(), db.ErrInvalidArgument)
			}
			w.refused(t, db.ErrInvalidArgument, func() error {
				_, err := w.client.Enqueue(ctx, bad)
				return err
			})
			w.refused(t, db.ErrInvalidArgument, func() error {
				return db.WithTx(ctx, w.Pool, func(tx pgx.Tx) error {
					_, err := w.client.EnqueueTx(ctx, tx, bad)
					return err
				})
			})
			// The third spec of a batch is bad: none of the batch is written.
			w.refused(t, db.ErrInvalidArgument, func() error {
				_, err := w.client.EnqueueMany(ctx, []jobs.Spec{rfGood(1), rfGood(2), bad, rfGood(4)})
				return err
			})
		})
	}
}

func TestEnqueueRefusesWithoutPermission(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	for _, tc := range []struct {
		name string
		c    *jobs.Client
	}{
		{"actor without grants", w.nobody},
		{"actor with job.claim only", w.claimer},
		{"project that does not exist", w.elsewhere},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			w.refused(t, db.ErrNotPermitted, func() error {
				_, err := tc.c.Enqueue(ctx, rfGood(1))
				return err
			})
			w.refused(t, db.ErrNotPermitted, func() error {
				_, err := tc.c.EnqueueMany(ctx, []jobs.Spec{rfGood(1), rfGood(2), rfGood(3)})
				return err
			})
			// Not even a duplicate of an existing job is handed out.
			dup := spec(`{"seed": "queued"}`)
			dup.IdempotencyKey = "seed-key"
			w.refused(t, db.ErrNotPermitted, func() error {
				_, err := tc.c.Enqueue(ctx, dup)
				return err
			})
		})
	}
}

func TestEnqueueRefusesAnIdempotencyConflict(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	keyed := func(payload string, schema int) jobs.Spec {
		s := spec(payload)
		s.IdempotencyKey = "seed-key"
		s.PayloadSchema = schema
		return s
	}
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"another payload", func(ctx context.Context) error {
			_, err := w.client.Enqueue(ctx, keyed(`{"seed": "other"}`, 1))
			return err
		}},
		{"another payload schema", func(ctx context.Context) error {
			_, err := w.client.Enqueue(ctx, keyed(`{"seed": "queued"}`, 2))
			return err
		}},
		{"in a batch, after good specs", func(ctx context.Context) error {
			_, err := w.client.EnqueueMany(ctx, []jobs.Spec{rfGood(1), rfGood(2), keyed(`{"seed": "other"}`, 1)})
			return err
		}},
		{"a key repeated in one batch with two payloads", func(ctx context.Context) error {
			a, b := rfGood(1), rfGood(2)
			a.IdempotencyKey, b.IdempotencyKey = "fresh-key", "fresh-key"
			_, err := w.client.EnqueueMany(ctx, []jobs.Spec{rfGood(3), a, b})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w.refused(t, db.ErrIdempotencyConflict, func() error { return tc.call(t.Context()) })
		})
	}
}

func TestEnqueueManyRefusesBatchSize(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	for _, n := range []int{0, jobs.MaxEnqueueBatch + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			specs := make([]jobs.Spec, n)
			for i := range specs {
				specs[i] = rfGood(i)
			}
			w.refused(t, db.ErrInvalidArgument, func() error {
				_, err := w.client.EnqueueMany(t.Context(), specs)
				return err
			})
		})
	}
}

// rfRaw is one job as docket.job_enqueue_many takes it, every field as SQL text,
// for calling the database without the Go validation in front of it.
type rfRaw struct {
	project, actor                              string
	kind, queue, priority, payload, schema, key string
	maxAttempts, lease, base, cap, jitter       string
	params, inputs, output, compensation        string
}

func rfRawGood() rfRaw {
	return rfRaw{
		project: project, actor: string(app),
		kind: "billing.invoice", queue: "default", priority: "1", payload: `{"raw": true}`, schema: "1", key: "",
		maxAttempts: "5", lease: "5 minutes", base: "1 second", cap: "10 minutes", jitter: "0.2",
		params: "null", inputs: "null", output: "", compensation: "",
	}
}

// enqueue calls docket.job_enqueue_many directly on q for r.
func (r rfRaw) enqueue(ctx context.Context, q db.DBTX, now time.Time) error {
	var n int
	return q.QueryRow(ctx, `
		SELECT count(*) FROM docket.job_enqueue_many(
		    $1::text, $2::text, $3::timestamptz,
		    ARRAY[$4::text], ARRAY[$5::text], ARRAY[$6::text::smallint], ARRAY[$7::text::jsonb], ARRAY[$8::text::integer],
		    ARRAY[$9::text], ARRAY[NULL::timestamptz], ARRAY[$10::text::integer], ARRAY[false], ARRAY[false],
		    ARRAY[$11::text::interval], ARRAY[$12::text::interval], ARRAY[$13::text::interval], ARRAY[$14::text::float8],
		    ARRAY[$15::text::jsonb], ARRAY[$16::text::jsonb], ARRAY[$17::text], ARRAY[0::bigint], ARRAY[0::bigint],
		    ARRAY[$18::text])`,
		r.project, r.actor, now, r.kind, r.queue, r.priority, r.payload, r.schema, r.key, r.maxAttempts,
		r.lease, r.base, r.cap, r.jitter, r.params, r.inputs, r.output, r.compensation).Scan(&n)
}

func TestDatabaseRefusesBadInputWithoutGo(t *testing.T) {
	t.Parallel()
	const (
		early = "DK010" // the function's own named refusal
		check = "23514" // a constraint of docket.jobs
	)
	cases := []struct {
		name string
		edit func(r *rfRaw)
		code string
		want error
	}{
		{"kind with a capital", func(r *rfRaw) { r.kind = "Billing" }, early, db.ErrInvalidArgument},
		{"kind with an empty segment", func(r *rfRaw) { r.kind = "billing..x" }, early, db.ErrInvalidArgument},
		{"kind of 129 characters", func(r *rfRaw) { r.kind = "k" + strings.Repeat("x", 128) }, early, db.ErrInvalidArgument},
		{"empty queue", func(r *rfRaw) { r.queue = "" }, early, db.ErrInvalidArgument},
		{"queue of 64 characters", func(r *rfRaw) { r.queue = strings.Repeat("q", 64) }, early, db.ErrInvalidArgument},
		{"payload one byte over 1 MiB", func(r *rfRaw) { r.payload = `"` + strings.Repeat("x", jobs.MaxPayloadBytes-1) + `"` }, check, db.ErrInvalidArgument}, // jobs_payload_size
		{"max attempts 101", func(r *rfRaw) { r.maxAttempts = "101" }, early, db.ErrInvalidArgument},
		{"max attempts 0", func(r *rfRaw) { r.maxAttempts = "0" }, early, db.ErrInvalidArgument},
		{"malformed actor", func(r *rfRaw) { r.actor = "app" }, early, db.ErrInvalidArgument},
		{"malformed project", func(r *rfRaw) { r.project = "ACME" }, early, db.ErrInvalidArgument},
		{"priority 5", func(r *rfRaw) { r.priority = "5" }, check, db.ErrInvalidArgument},
		{"payload schema 0", func(r *rfRaw) { r.schema = "0" }, check, db.ErrInvalidArgument},
		{"lease 500ms", func(r *rfRaw) { r.lease = "500 milliseconds" }, check, db.ErrInvalidArgument},
		{"lease 25h", func(r *rfRaw) { r.lease = "25 hours" }, check, db.ErrInvalidArgument},
		{"backoff base negative", func(r *rfRaw) { r.base = "-1 second" }, check, db.ErrInvalidArgument},
		{"backoff cap below base", func(r *rfRaw) { r.base, r.cap = "1 minute", "1 second" }, check, db.ErrInvalidArgument},
		{"jitter 1.5", func(r *rfRaw) { r.jitter = "1.5" }, check, db.ErrInvalidArgument},
		{"jitter NaN", func(r *rfRaw) { r.jitter = "NaN" }, check, db.ErrInvalidArgument},
		{"key with a control character", func(r *rfRaw) { r.key = "invoice\x017" }, check, db.ErrInvalidArgument},
		{"key of 256 characters", func(r *rfRaw) { r.key = strings.Repeat("k", 256) }, check, db.ErrInvalidArgument},
		{"params an array", func(r *rfRaw) { r.params = "[1]" }, check, db.ErrInvalidArgument},
		{"101 inputs", func(r *rfRaw) { r.inputs = `["` + strings.Repeat(`i", "`, 100) + `i"]` }, check, db.ErrInvalidArgument},
		{"an input of 1001 characters", func(r *rfRaw) { r.inputs = `["` + strings.Repeat("i", 1001) + `"]` }, check, db.ErrInvalidArgument},
		{"bad compensation kind", func(r *rfRaw) { r.compensation = "Undo" }, check, db.ErrInvalidArgument},
		{"project that does not exist", func(r *rfRaw) { r.project = "nope" }, "DK009", db.ErrNotPermitted},
		{"actor without job.create", func(r *rfRaw) { r.actor = string(nobody) }, "DK009", db.ErrNotPermitted},
	}

	t.Run("control: the same call with good input enqueues", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		require.NoError(t, rfRawGood().enqueue(t.Context(), e.Pool, e.Clock.Now()))
		n, ev := ccCount(t, e.Pool)
		require.Equal(t, 1, n)
		require.Equal(t, 1, ev)
	})

	w := rfSetup(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rfRawGood()
			tc.edit(&r)
			w.refused(t, tc.want, func() error {
				err := r.enqueue(t.Context(), w.Pool, w.Clock.Now())
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr)
				require.Equal(t, tc.code, pgErr.Code, pgErr.Message)
				return db.Translate(err, "raw.job_enqueue_many")
			})
		})
	}
}

func TestClaimRefusesInvalidOptions(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	cases := []struct {
		name  string
		queue string
		opts  jobs.ClaimOptions
	}{
		{"limit -1", "default", jobs.ClaimOptions{Limit: -1}},
		{"limit over the batch bound", "default", jobs.ClaimOptions{Limit: jobs.MaxClaimBatch + 1}},
		{"lease 500ms", "default", jobs.ClaimOptions{Lease: 500 * time.Millisecond}},
		{"lease 25h", "default", jobs.ClaimOptions{Lease: 25 * time.Hour}},
		{"lease negative", "default", jobs.ClaimOptions{Lease: -time.Minute}},
		{"empty queue", "", jobs.ClaimOptions{}},
		{"queue with a capital", "Default", jobs.ClaimOptions{}},
		{"queue of 64 characters", strings.Repeat("q", 64), jobs.ClaimOptions{}},
		{"queue with a dot", "default.fast", jobs.ClaimOptions{}},
		{"decoder with a bad kind", "default", jobs.ClaimOptions{Decoders: []jobs.Decoder{{Kind: "Billing", Schema: 1}}}},
		{"decoder with schema 0", "default", jobs.ClaimOptions{Decoders: []jobs.Decoder{{Kind: "billing.invoice", Schema: 0}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			w.refused(t, db.ErrInvalidArgument, func() error {
				_, err := w.client.Claim(ctx, tc.queue, tc.opts)
				return err
			})
			if tc.queue == "default" && tc.opts.Limit == 0 {
				// ClaimID ignores the limit and the queue; it checks the rest.
				w.refused(t, db.ErrInvalidArgument, func() error {
					_, _, err := w.client.ClaimID(ctx, w.queued.ID, tc.opts)
					return err
				})
			}
		})
	}
}

func TestLeaseCallsRefuseInvalidArguments(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	l := w.held.Lease()
	cases := []struct {
		name string
		want error
		call func(ctx context.Context) error
	}{
		{"renew for 500ms", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Renew(ctx, l, 500*time.Millisecond)
			return err
		}},
		{"renew for 25h", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Renew(ctx, l, 25*time.Hour)
			return err
		}},
		{"renew for a negative lease", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Renew(ctx, l, -time.Hour)
			return err
		}},
		{"fail with an unknown class", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Fail(ctx, l, jobs.Failure{Class: "maybe"})
			return err
		}},
		{"fail with a capitalised class", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Fail(ctx, l, jobs.Failure{Class: "Permanent"})
			return err
		}},
		{"complete with a result that is not JSON", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Complete(ctx, l, json.RawMessage(`{"paid":`), nil)
			return err
		}},
		{"complete with a result over 1 MiB", db.ErrInvalidArgument, func(ctx context.Context) error {
			return db.WithTx(ctx, w.Pool, func(tx pgx.Tx) error {
				_, err := w.client.CompleteTx(ctx, tx, l, json.RawMessage(`"`+strings.Repeat("r", jobs.MaxPayloadBytes)+`"`))
				return err
			})
		}},
		{"complete many, empty", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.CompleteMany(ctx, nil)
			return err
		}},
		{"complete many, over the batch bound", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.CompleteMany(ctx, make([]jobs.Completion, jobs.MaxCompleteBatch+1))
			return err
		}},
		{"complete many, one result not JSON", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.CompleteMany(ctx, []jobs.Completion{{Lease: l}, {Lease: l, Result: json.RawMessage(`nope`)}})
			return err
		}},
		{"complete many, one result over 1 MiB", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.CompleteMany(ctx, []jobs.Completion{
				{Lease: l}, {Lease: l, Result: json.RawMessage(`"` + strings.Repeat("r", jobs.MaxPayloadBytes) + `"`)},
			})
			return err
		}},
		{"expire leases, limit 0", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.ExpireLeases(ctx, 0)
			return err
		}},
		{"expire leases, over the sweep bound", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.ExpireLeases(ctx, jobs.MaxSweepBatch+1)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w.refused(t, tc.want, func() error { return tc.call(t.Context()) })
		})
	}
}

func TestReconcileAndCancelRefusals(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	const unknownID = int64(1) << 40
	cases := []struct {
		name string
		want error
		call func(ctx context.Context) error
	}{
		{"reconcile with an unknown outcome", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Reconcile(ctx, w.uncertain.ID, "maybe", nil, "")
			return err
		}},
		{"reconcile with no outcome", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Reconcile(ctx, w.uncertain.ID, "", nil, "")
			return err
		}},
		{"reconcile with a capitalised outcome", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Reconcile(ctx, w.uncertain.ID, "Succeeded", nil, "")
			return err
		}},
		{"reconcile failed with a result", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Reconcile(ctx, w.uncertain.ID, jobs.DidFail, json.RawMessage(`{"paid": false}`), "")
			return err
		}},
		{"reconcile run-again with a result", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Reconcile(ctx, w.uncertain.ID, jobs.RunAgain, json.RawMessage(`{}`), "")
			return err
		}},
		{"reconcile with a result that is not JSON", db.ErrInvalidArgument, func(ctx context.Context) error {
			_, err := w.client.Reconcile(ctx, w.uncertain.ID, jobs.DidSucceed, json.RawMessage(`{`), "")
			return err
		}},
		{"reconcile by an actor without grants", db.ErrNotPermitted, func(ctx context.Context) error {
			_, err := w.nobody.Reconcile(ctx, w.uncertain.ID, jobs.DidSucceed, nil, "")
			return err
		}},
		{"reconcile by an actor with job.claim only", db.ErrNotPermitted, func(ctx context.Context) error {
			_, err := w.claimer.Reconcile(ctx, w.uncertain.ID, jobs.DidFail, nil, "")
			return err
		}},
		{"reconcile an unknown job", db.ErrNotFound, func(ctx context.Context) error {
			_, err := w.client.Reconcile(ctx, unknownID, jobs.DidSucceed, nil, "")
			return err
		}},
		{"reconcile a job that is not uncertain", db.ErrIllegalTransition, func(ctx context.Context) error {
			_, err := w.client.Reconcile(ctx, w.held.ID, jobs.DidSucceed, nil, "")
			return err
		}},
		{"cancel an uncertain job without grants", db.ErrNotPermitted, func(ctx context.Context) error {
			_, err := w.nobody.Cancel(ctx, w.uncertain.ID, "")
			return err
		}},
		{"cancel a queued job without grants", db.ErrNotPermitted, func(ctx context.Context) error {
			_, err := w.nobody.Cancel(ctx, w.queued.ID, "")
			return err
		}},
		{"cancel a held job with job.claim only", db.ErrNotPermitted, func(ctx context.Context) error {
			_, err := w.claimer.Cancel(ctx, w.held.ID, "")
			return err
		}},
		{"cancel an unknown job", db.ErrNotFound, func(ctx context.Context) error {
			_, err := w.client.Cancel(ctx, unknownID, "")
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w.refused(t, tc.want, func() error { return tc.call(t.Context()) })
		})
	}
}

func TestListRefusesInvalidFilters(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	for _, f := range []jobs.Filter{
		{Limit: db.MaxPage + 1},
		{Limit: -1},
		{State: "running"},
		{State: "Queued"},
	} {
		t.Run(fmt.Sprintf("%+v", f), func(t *testing.T) {
			t.Parallel()
			w.refused(t, db.ErrInvalidArgument, func() error {
				_, err := w.client.List(t.Context(), f)
				return err
			})
		})
	}
}

func TestNewClientRefusesInvalidConfig(t *testing.T) {
	t.Parallel()
	e := setup(t)
	good := jobs.Config{Project: project, Actor: app, Clock: e.Clock}
	with := func(edit func(c *jobs.Config)) jobs.Config {
		c := good
		edit(&c)
		return c
	}
	var unopened *pgxpool.Pool
	cases := []struct {
		name string
		pool db.Pool
		cfg  jobs.Config
	}{
		{"nil pool", nil, good},
		{"a nil *pgxpool.Pool", unopened, good},
		{"project with a capital", e.Pool, with(func(c *jobs.Config) { c.Project = "Acme" })},
		{"project starting with a dot", e.Pool, with(func(c *jobs.Config) { c.Project = ".acme" })},
		{"project with a space", e.Pool, with(func(c *jobs.Config) { c.Project = "ac me" })},
		{"project of 64 characters", e.Pool, with(func(c *jobs.Config) { c.Project = strings.Repeat("a", 64) })},
		{"project wildcard", e.Pool, with(func(c *jobs.Config) { c.Project = "*" })},
		{"empty actor", e.Pool, with(func(c *jobs.Config) { c.Actor = "" })},
		{"actor without a kind", e.Pool, with(func(c *jobs.Config) { c.Actor = "app" })},
		{"actor with a space", e.Pool, with(func(c *jobs.Config) { c.Actor = "svc:my app" })},
		{"actor with a capital kind", e.Pool, with(func(c *jobs.Config) { c.Actor = "Svc:app" })},
		{"actor with an empty name", e.Pool, with(func(c *jobs.Config) { c.Actor = "svc:" })},
		{"actor name over 200 characters", e.Pool, with(func(c *jobs.Config) { c.Actor = access.Actor("svc:" + strings.Repeat("a", 201)) })},
	}
	before := snapshot(t, e.Pool)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := jobs.NewClient(tc.pool, tc.cfg)
			require.ErrorIs(t, err, db.ErrInvalidArgument)
			require.Nil(t, c)
			require.Equal(t, before, snapshot(t, e.Pool))
		})
	}
}

// A client made without a project works by job id only: what needs a
// project is refused.
func TestProjectlessClientRefusesProjectWork(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	operator, err := jobs.NewClient(w.API, jobs.Config{Actor: app, Clock: w.Clock})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"enqueue", func(ctx context.Context) error {
			_, err := operator.Enqueue(ctx, rfGood(1))
			return err
		}},
		{"enqueue many", func(ctx context.Context) error {
			_, err := operator.EnqueueMany(ctx, []jobs.Spec{rfGood(1), rfGood(2)})
			return err
		}},
		{"claim", func(ctx context.Context) error {
			_, err := operator.Claim(ctx, "default", jobs.ClaimOptions{})
			return err
		}},
		{"list", func(ctx context.Context) error {
			_, err := operator.List(ctx, jobs.Filter{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w.refused(t, db.ErrInvalidArgument, func() error { return tc.call(t.Context()) })
		})
	}
}

func TestNewKindRefusesInvalidNames(t *testing.T) {
	t.Parallel()
	type invoice struct{ N int }
	cases := []struct {
		name   string
		kind   string
		schema int
	}{
		{"empty name", "", 1},
		{"capital", "Billing", 1},
		{"empty segment", "billing..x", 1},
		{"space", "billing invoice", 1},
		{"leading digit", "1x", 1},
		{"129 characters", "k" + strings.Repeat("x", 128), 1},
		{"schema 0", "billing.invoice", 0},
		{"schema negative", "billing.invoice", -1},
		{"schema over 32 bits", "billing.invoice", math.MaxInt32 + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k, err := jobs.NewKind[invoice](tc.kind, tc.schema)
			require.ErrorIs(t, err, db.ErrInvalidArgument)
			require.Equal(t, jobs.Kind[invoice]{}, k)
			require.Panics(t, func() { jobs.MustKind[invoice](tc.kind, tc.schema) })
		})
	}
	t.Run("the zero kind makes no spec", func(t *testing.T) {
		t.Parallel()
		_, err := jobs.Kind[invoice]{}.Spec(invoice{N: 1})
		require.ErrorIs(t, err, db.ErrInvalidArgument)
	})
	t.Run("a payload that does not encode", func(t *testing.T) {
		t.Parallel()
		k := jobs.MustKind[chan int]("billing.chan", 1)
		_, err := k.Spec(make(chan int))
		require.ErrorIs(t, err, db.ErrInvalidArgument)
	})
}

func TestEnqueueAcceptsTheBounds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	exact := json.RawMessage(`"` + strings.Repeat("x", jobs.MaxPayloadBytes-2) + `"`)
	edits := map[string]func(s *jobs.Spec){
		"kind of 128 characters":      func(s *jobs.Spec) { s.Kind = "k" + strings.Repeat("x", jobs.MaxKindLen-1) },
		"queue of 63 characters":      func(s *jobs.Spec) { s.Queue = "0" + strings.Repeat("q", 62) },
		"payload of exactly 1 MiB":    func(s *jobs.Spec) { s.Payload = exact },
		"max attempts 1":              func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{MaxAttempts: 1} },
		"max attempts 100":            func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{MaxAttempts: jobs.MaxAttemptsMax} },
		"lease 1s":                    func(s *jobs.Spec) { s.Lease = jobs.MinLease },
		"lease 24h":                   func(s *jobs.Spec) { s.Lease = jobs.MaxLease },
		"backoff 1ms to 7 days":       func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Base: time.Millisecond, Cap: 7 * 24 * time.Hour} },
		"backoff base 24h":            func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Base: 24 * time.Hour} },
		"jitter 1":                    func(s *jobs.Spec) { s.Retry = jobs.RetryPolicy{Jitter: 1} },
		"priority 4":                  func(s *jobs.Spec) { s.Priority = jobs.MaxPriority },
		"key of 255 two-byte letters": func(s *jobs.Spec) { s.IdempotencyKey = strings.Repeat("é", jobs.MaxKeyLen) },
		"100 inputs":                  func(s *jobs.Spec) { s.Inputs = make([]string, jobs.MaxInputs) },
		"params an object":            func(s *jobs.Spec) { s.Params = json.RawMessage(` {"a": 1}`) },
	}
	for name, edit := range edits {
		s := rfGood(0)
		s.Payload = json.RawMessage(fmt.Sprintf(`{"bound": %q}`, name))
		edit(&s)
		require.NoError(t, s.Validate(), name)
		_, err := e.client.Enqueue(ctx, s)
		require.NoError(t, err, name)
	}
	n, _ := ccCount(t, e.Pool)
	require.Equal(t, len(edits), n)
}

// TestRefusalErrorsNameTheirSentinelOnly checks that a refusal matches its
// own sentinel and no other, so callers can switch on errors.Is.
func TestRefusalErrorsNameTheirSentinelOnly(t *testing.T) {
	t.Parallel()
	w := rfSetup(t)
	ctx := t.Context()
	sentinels := []error{db.ErrInvalidArgument, db.ErrNotPermitted, db.ErrNotFound, db.ErrStaleClaim,
		db.ErrIdempotencyConflict, db.ErrTerminal, db.ErrIllegalTransition}
	bad := rfGood(0)
	bad.Kind = "Billing"
	_, errInvalid := w.client.Enqueue(ctx, bad)
	_, errDenied := w.nobody.Enqueue(ctx, rfGood(0))
	_, errMissing := w.client.Cancel(ctx, 1<<40, "")
	for want, err := range map[error]error{db.ErrInvalidArgument: errInvalid, db.ErrNotPermitted: errDenied, db.ErrNotFound: errMissing} {
		for _, s := range sentinels {
			require.Equal(t, s == want, errors.Is(err, s), "%v is %v?", err, s)
		}
	}
	require.Equal(t, w.before, snapshot(t, w.Pool))
}
