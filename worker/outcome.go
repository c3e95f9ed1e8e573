package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/docket-dev/docket/jobs"
)

// outcomeError is a handler's error carrying how the attempt should be
// recorded. Make one with [Fail] or [RetryAfter].
type outcomeError struct {
	class      jobs.FailureClass
	retryAfter time.Duration
	err        error
}

func (e *outcomeError) Error() string {
	if e.err == nil {
		return string(e.class)
	}
	return e.err.Error()
}

func (e *outcomeError) Unwrap() error { return e.err }

// Fail marks err, a handler's error, with the failure class the attempt is
// recorded as (a plain error is [jobs.ClassRetryable]):
//
//   - [jobs.ClassPermanent]: it will never succeed; the job becomes
//     [jobs.Failed], with no further attempt.
//   - [jobs.ClassUncertain]: nobody knows whether the attempt had its effect
//     (a timeout after sending a payment, say); the job becomes
//     [jobs.Uncertain] for an operator to reconcile, unless it is
//     repeatable, when it is retried like any other failure.
//   - [jobs.ClassRetryable]: retried after the job's backoff, as a plain
//     error is; see [RetryAfter] to choose the wait.
//
// A class that is none of these is recorded as retryable, its name kept in
// the diagnostic.
func Fail(class jobs.FailureClass, err error) error {
	err = orUnknown(err)
	switch class {
	case jobs.ClassRetryable, jobs.ClassPermanent, jobs.ClassUncertain:
	default:
		err = fmt.Errorf("unknown failure class %q: %w", string(class), err)
		class = jobs.ClassRetryable
	}
	return &outcomeError{class: class, err: err}
}

// RetryAfter marks err as a retryable failure whose next attempt should wait
// d instead of the job's backoff: a peer's hint such as an HTTP Retry-After.
// d is clamped to [jobs.MaxRetryAfter]; zero or negative retries at once.
func RetryAfter(d time.Duration, err error) error {
	if d <= 0 {
		d = -1 // jobs.Failure: negative retries at once
	}
	return &outcomeError{class: jobs.ClassRetryable, retryAfter: d, err: orUnknown(err)}
}

func orUnknown(err error) error {
	if err == nil {
		return errors.New("no error given")
	}
	return err
}

// failureOf classifies a handler's error: a plain error is retryable.
func failureOf(err error) jobs.Failure {
	var oe *outcomeError
	if errors.As(err, &oe) {
		return jobs.Failure{Class: oe.class, Diagnostic: err.Error(), RetryAfter: oe.retryAfter}
	}
	return jobs.Failure{Class: jobs.ClassRetryable, Diagnostic: err.Error()}
}

// maxStack bounds the stack a panic's diagnostic carries, in bytes; the
// database cuts the whole diagnostic to [jobs.MaxDiagnosticLen] characters.
const maxStack = 3000

// panicError is a handler's panic, with the start of its stack.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string {
	stack := e.stack
	if len(stack) > maxStack {
		stack = append(stack[:maxStack:maxStack], "\n…"...)
	}
	return fmt.Sprintf("panic: %v\n\n%s", e.value, stack)
}
