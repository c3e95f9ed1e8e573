package docketotel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/internal/testkit"
	"github.com/docket-dev/docket/jobs"
)

// childEnv holds, as JSON, the childSpec of the enqueuing process the test
// binary is to be.
const childEnv = "DOCKET_OTEL_ENQUEUER"

// childSpec is what an enqueuing process is told: whom to log in as, and
// the instant its clock stands at.
type childSpec struct {
	URL string    `json:"url"`
	Now time.Time `json:"now"`
}

// childReport is what it prints, as one line of JSON: the job it enqueued,
// and the trace and span ids of its request's span and of its enqueue span.
type childReport struct {
	Job           int64  `json:"job"`
	RequestTrace  string `json:"request_trace"`
	RequestSpan   string `json:"request_span"`
	EnqueueTrace  string `json:"enqueue_trace"`
	EnqueueSpan   string `json:"enqueue_span"`
	EnqueueKind   string `json:"enqueue_kind"`
	EnqueueParent string `json:"enqueue_parent"`
}

// runChild is the enqueuing process: with a tracer of its own, it serves a
// "request" in a span, and enqueues a job in the request's own transaction,
// beside a write of its own; then it prints what its recorder saw and exits.
func runChild(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	if err := enqueueTraced(spec); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func enqueueTraced(spec childSpec) error {
	ctx := context.Background()
	pool, err := db.Open(ctx, spec.URL)
	if err != nil {
		return err
	}
	defer pool.Close()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	client, err := jobs.NewClient(pool, jobs.Config{Project: project, Actor: app, Clock: db.NewFakeClock(spec.Now), TracerProvider: tp})
	if err != nil {
		return err
	}
	ctx, request := tp.Tracer("shop").Start(ctx, "POST /orders")
	var job int64
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		s, err := orderKind.Spec(order{ID: 42})
		if err != nil {
			return err
		}
		e, err := client.EnqueueTx(ctx, tx, s)
		job = e.Job.ID
		return err
	})
	request.End()
	if err != nil {
		return err
	}
	r := childReport{Job: job, RequestTrace: request.SpanContext().TraceID().String(), RequestSpan: request.SpanContext().SpanID().String()}
	for _, s := range recorder.Ended() {
		if s.SpanKind() == trace.SpanKindProducer {
			r.EnqueueTrace, r.EnqueueSpan = s.SpanContext().TraceID().String(), s.SpanContext().SpanID().String()
			r.EnqueueKind, r.EnqueueParent = s.Name(), s.Parent().SpanID().String()
		}
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// enqueueInChild runs the test binary as an enqueuing process logged in as
// login, and returns its report.
func enqueueInChild(t *testing.T, e testkit.Env, login testkit.Login) childReport {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	spec, err := json.Marshal(childSpec{URL: login.URL, Now: e.Clock.Now()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, "the enqueuing process")
	var r childReport
	require.NoError(t, json.Unmarshal(out, &r), "its report: %s", out)
	return r
}
