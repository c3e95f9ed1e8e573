//go:build unix

package faults

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/jobs"
)

// recovery is how a run came back from one fault, measured on the instants
// its successes were recorded at (docket.jobs.finished_at, from the
// worker's clock, the system's).
type recovery struct {
	fault    string
	length   time.Duration // fault to cleared: Postgres back, a new worker ready, no more terminations
	rate     float64       // successes a second before the fault
	first    time.Duration // fault to the first success after it took hold; -1: none
	halfRate time.Duration // fault to the end of the first second after it took hold with rate/2 successes; -1: never
	ranOut   bool          // the jobs ran out before a second with rate/2 successes could pass
}

// window is the span over which a rate after a fault is counted.
const window = time.Second

// measure computes the recovery from fault s given every success's instant,
// in order. The rate before the fault is counted from the end of the fault
// before it (or the first worker's start) to its beginning; what comes after
// is counted from when it took hold, since a success recorded between was
// under way before.
func measure(s span, successes []time.Time) recovery {
	rc := recovery{fault: s.what, length: s.cleared.Sub(s.began), first: -1, halfRate: -1}
	index := func(t time.Time) int {
		return sort.Search(len(successes), func(i int) bool { return !successes[i].Before(t) })
	}
	from, before := index(s.since), index(s.began)
	if n := before - from; n > 1 {
		if d := successes[before-1].Sub(successes[from]); d > 0 {
			rc.rate = float64(n-1) / d.Seconds()
		}
	}
	after := successes[index(s.effective):]
	if len(after) == 0 {
		return rc
	}
	rc.first = after[0].Sub(s.began)
	want := rc.rate / 2 * window.Seconds()
	lo := 0
	for hi, at := range after {
		if at.Sub(s.effective) < window {
			continue // a window must lie after the fault took hold
		}
		for !after[lo].After(at.Add(-window)) {
			lo++
		}
		if float64(hi-lo+1) >= want {
			rc.halfRate = at.Sub(s.began)
			return rc
		}
	}
	rc.ranOut = true
	return rc
}

// successes returns the instants at which the jobs succeeded, in order.
func (r *rig) successes() []time.Time {
	r.t.Helper()
	rows, err := r.owner.Query(r.t.Context(),
		"SELECT finished_at FROM docket.jobs WHERE state = 'succeeded' ORDER BY finished_at")
	require.NoError(r.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(r.t, err)
	return out
}

// result is one scenario's report.
type result struct {
	name       string
	jobs       int
	verdict    verdict
	recoveries []recovery
	events     []counted
	warns      []counted
	notes      []string // what the fault did: backends ended, cuts fired, a stop's time
	failed     []string // the checks that failed
	skipped    bool
}

// log writes the report to the test's log.
func (res result) log(logf func(string, ...any)) {
	v := res.verdict
	logf("%s: %d jobs: %s; %d retried", res.name, res.jobs, v.states, v.retried)
	logf("%s: uncertain %d: %d had their outside effect, %d never started (no effect, no started marker) %v; recorded late %d",
		res.name, v.uncertain, v.uncertainRan, v.uncertainUnstarted, v.unstartedIDs[:min(examples, len(v.unstartedIDs))], v.late)
	logf("%s: inside writes not exactly once %d, run twice %d, histories failing verification %d",
		res.name, len(v.wrongInside), len(v.ranTwice), len(v.unverified))
	for _, rc := range res.recoveries {
		logf("%s: %s", res.name, rc)
	}
	for _, n := range res.notes {
		logf("%s: %s", res.name, n)
	}
	logf("%s: worker events: %s", res.name, list(res.events, 10))
	logf("%s: worker warnings and errors: %s", res.name, list(res.warns, 10))
}

func (rc recovery) String() string {
	return fmt.Sprintf("%s: lasted %s; %.0f jobs/s before; first success after %s; half that rate after %s",
		rc.fault, ms(rc.length), rc.rate, ms(rc.first), rc.halfRateString())
}

func (rc recovery) halfRateString() string {
	if rc.halfRate < 0 && rc.ranOut {
		return "- (jobs ran out)"
	}
	return ms(rc.halfRate)
}

// ms shows d in milliseconds, or "-" for a negative d: never.
func ms(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

// list shows the first n of cs.
func list(cs []counted, n int) string {
	if len(cs) == 0 {
		return "none"
	}
	parts := make([]string, 0, n)
	for _, c := range cs[:min(n, len(cs))] {
		parts = append(parts, fmt.Sprintf("%d× %s", c.n, c.what))
	}
	if len(cs) > n {
		parts = append(parts, fmt.Sprintf("and %d more kinds", len(cs)-n))
	}
	return strings.Join(parts, "; ")
}

// summary gathers the scenarios' results for the table at the end; safe
// for concurrent use.
type summary struct {
	mu      sync.Mutex
	results []result
}

func (s *summary) add(res result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, res)
}

// String is the table: a row a scenario, in the order they were declared.
func (s *summary) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := append([]result(nil), s.results...)
	order := map[string]int{}
	for i, sc := range scenarios(theForm()) {
		order[sc.name] = i
	}
	sort.Slice(rs, func(i, j int) bool { return order[rs[i].name] < order[rs[j].name] })
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "scenario\tjobs\tsucceeded\tuncertain\t(ran/unstarted)\tlate\tother\tinside≠1\ttwice\tunverified\tfirst success\thalf rate\tverdict")
	for _, res := range rs {
		v := res.verdict
		other := 0
		for st, n := range v.states {
			if st != jobs.Succeeded && st != jobs.Uncertain {
				other += n
			}
		}
		first, half := "-", "-"
		if len(res.recoveries) > 0 {
			// The slowest of the run's recoveries.
			slowest := res.recoveries[0]
			for _, rc := range res.recoveries[1:] {
				slowest.first = slower(slowest.first, rc.first)
				slowest.halfRate = slower(slowest.halfRate, rc.halfRate)
				slowest.ranOut = slowest.ranOut || rc.ranOut
			}
			first, half = ms(slowest.first), slowest.halfRateString()
		}
		verdict := "pass"
		switch {
		case res.skipped:
			verdict = "skipped"
		case len(res.failed) > 0:
			verdict = "FAIL: " + strings.Join(res.failed, "; ")
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t(%d/%d)\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", res.name, res.jobs, v.states[jobs.Succeeded],
			v.uncertain, v.uncertainRan, v.uncertainUnstarted, v.late, other, len(v.wrongInside), len(v.ranTwice), len(v.unverified),
			first, half, verdict)
	}
	_ = w.Flush()
	return b.String()
}

// slower is the longer of two recovery times, never (negative) being the
// longest.
func slower(a, b time.Duration) time.Duration {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

// measure counts the rate before a fault from the previous one's end, and
// the recovery from when the fault took hold.
func TestMeasure(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var successes []time.Time
	every := func(from, to time.Duration, n int) {
		for i := range n {
			successes = append(successes, t0.Add(from+(to-from)*time.Duration(i)/time.Duration(n)))
		}
	}
	every(0, 10*time.Second, 1000)                                               // 100 a second
	every(10*time.Second+time.Millisecond, 10*time.Second+2*time.Millisecond, 5) // under way at the fault
	every(12*time.Second, 13*time.Second, 20)                                    // 20 a second: not yet half
	every(13*time.Second, 15*time.Second, 200)                                   // 100 a second again
	s := span{what: "test", since: t0, began: t0.Add(10 * time.Second), effective: t0.Add(10*time.Second + 5*time.Millisecond),
		cleared: t0.Add(12 * time.Second)}
	rc := measure(s, successes)
	require.InDelta(t, 100, rc.rate, 1)
	require.Equal(t, 2*time.Second, rc.first)
	require.Equal(t, 2*time.Second, rc.length)
	require.InDelta(t, 3.37, rc.halfRate.Seconds(), 0.02,
		"the first second with 50 successes ends 3.37 s after the fault: 13 at 20 a second, then 37 at 100")
	require.False(t, rc.ranOut)

	rc = measure(s, successes[:1005+20])
	require.Equal(t, time.Duration(-1), rc.halfRate)
	require.True(t, rc.ranOut)
}
