package worker

import (
	"context"
	"errors"
	"sync"

	"github.com/docket-dev/docket/jobs"
)

// spendMeter adds up what one attempt's handler reported it spent.
type spendMeter struct {
	mu    sync.Mutex
	spent jobs.Spend
}

type spendKey struct{}

// ReportSpend adds s to what the attempt whose handler received ctx spent:
// effects, and money in integer minor units of the job's budget's currency
// (see [jobs.Budget]). The total is recorded with the attempt's outcome,
// success or failure, and counts against the job's ceilings: a retryable
// failure that leaves one reached makes the job [jobs.Exhausted] instead of
// retrying it. Report as you spend, from any goroutine of the handler. An
// attempt released when the worker stops records no spend.
//
// It refuses a negative report, and a ctx that is not a handler's.
func ReportSpend(ctx context.Context, s jobs.Spend) error {
	m, _ := ctx.Value(spendKey{}).(*spendMeter)
	switch {
	case m == nil:
		return errors.New("docket worker: ReportSpend outside a handler's attempt")
	case s.Effects < 0 || s.Money < 0:
		return errors.New("docket worker: a spend report is whole numbers of zero or more")
	}
	m.mu.Lock()
	m.spent.Effects += s.Effects
	m.spent.Money += s.Money
	m.mu.Unlock()
	return nil
}

// total is what the attempt reported so far.
func (m *spendMeter) total() jobs.Spend {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spent
}
