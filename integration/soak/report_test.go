//go:build unix

package soak

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sliceRate is one row of the rate table: the completions from..to, and
// when they happened, counted from the first sample.
type sliceRate struct {
	from, to   int64
	start, end time.Duration
}

func (s sliceRate) rate() float64 { return float64(s.to-s.from) / (s.end - s.start).Seconds() }

// when is the instant the completions reached n, interpolated between the
// samples either side, counted from the first sample.
func (r *result) when(n int64) time.Duration {
	ss := r.samples
	i, _ := slices.BinarySearchFunc(ss, n, func(s sample, n int64) int {
		switch c := s.completed; {
		case c < n:
			return -1
		case c > n:
			return 1
		}
		return 0
	})
	// Counts only grow, so ss[i] is the first sample at n or beyond.
	if i == 0 {
		return 0
	}
	if i == len(ss) {
		i = len(ss) - 1
	}
	a, b := ss[i-1], ss[i]
	at := a.at.Sub(ss[0].at)
	if span := b.completed - a.completed; span > 0 {
		at += time.Duration(float64(b.at.Sub(a.at)) * float64(n-a.completed) / float64(span))
	}
	return at
}

// sampleAt is the first sample at n completions or more.
func (r *result) sampleAt(n int64) sample {
	for _, s := range r.samples {
		if s.completed >= n {
			return s
		}
	}
	return r.samples[len(r.samples)-1]
}

// slices are the run's successive slices of completions; the first starts
// at the first sample's count.
func (r *result) slices() []sliceRate {
	first := r.samples[0].completed
	var out []sliceRate
	for from := int64(0); from < int64(r.form.jobs); from += int64(r.form.slice) {
		s := sliceRate{from: max(from, first), to: min(from+int64(r.form.slice), int64(r.form.jobs))}
		if s.to <= s.from {
			continue
		}
		s.start, s.end = r.when(s.from), r.when(s.to)
		out = append(out, s)
	}
	return out
}

// wall is how long the run took, from the first sample to the last.
func (r *result) wall() time.Duration {
	return r.samples[len(r.samples)-1].at.Sub(r.samples[0].at)
}

// ratio is the last slice's rate over the first's.
func (r *result) ratio() float64 {
	ss := r.slices()
	return ss[len(ss)-1].rate() / ss[0].rate()
}

// sizesAt is the first size snapshot labelled label, or the first taken at
// n completions or more when label is "".
func (r *result) sizesAt(label string, n int64) sizes {
	for _, s := range r.sizes {
		if (label != "" && s.label == label) || (label == "" && s.label != "start" && s.completed >= n) {
			return s
		}
	}
	return sizes{}
}

func (s sizes) table(name string) tableSize {
	for _, t := range s.tables {
		if t.name == name {
			return t
		}
	}
	return tableSize{}
}

// report is the run's tables.
func (r *result) report() string {
	var b strings.Builder
	pruning := "off"
	if r.prune {
		pruning = fmt.Sprintf("on: retention.Sweep every %v, limit %s", sweepEvery, thousands(sweepLimit))
	}
	fmt.Fprintf(&b, "database %s (oid %d); pruning %s\n\n", r.database, r.oid, pruning)

	// The rate of each slice, with the database's count and the tables'
	// total sizes at its end.
	t := table{head: []string{"completions", "ended at s", "seconds", "jobs/s", "buffers/job", "WAL/job", "looked at", "db count",
		"succeeded kept", "jobs", "job_events", "prunes", "river_job", "autovacuums jobs/events", "load 1m"}}
	before := r.sizesAt("start", 0)
	for _, s := range r.slices() {
		sz := r.sizesAt("", s.to)
		jt, et := sz.table("docket.jobs"), sz.table("docket.job_events")
		perJob, walJob := "–", "–"
		if n := sz.count.completed() - before.count.completed(); n > 0 {
			perJob = fmt.Sprintf("%.1f", float64(sz.buffers-before.buffers)/float64(n))
			walJob = fmt.Sprintf("%d B", (sz.wal-before.wal)/n)
		}
		before = sz
		t.add(thousands(s.from)+" – "+thousands(s.to), seconds(s.end), seconds(s.end-s.start), thousands(int64(s.rate())), perJob, walJob,
			thousands(sz.completed), thousands(sz.count.completed()), thousands(sz.count.succeeded), pretty(jt.total), pretty(et.total),
			pretty(sz.table("docket.prunes").total), pretty(sz.table("docket.river_job").total),
			thousands(jt.autovacuums)+" / "+thousands(et.autovacuums), r.sampleAt(s.to).load)
	}
	b.WriteString("rate of each slice of completions (as the workers reported them, looked at every second); " +
		"the buffers read or hit in the database (pg_stat_database) and the WAL the server wrote (pg_current_wal_lsn) " +
		"for each job completed since the row before; " +
		"then, at the first look after the slice ended: the completions the workers had reported, " +
		"the database's count of completed jobs (succeeded present + pruned), the succeeded jobs not yet pruned, " +
		"the sizes (pg_total_relation_size), the autovacuums so far, the machine's load:\n")
	b.WriteString(t.String())
	fmt.Fprintf(&b, "last slice / first slice: %.3f (target ≥ 0.9)", r.ratio())
	if ss := r.slices(); len(ss) > 2 {
		fmt.Fprintf(&b, "; last / second: %.3f", ss[len(ss)-1].rate()/ss[1].rate())
	}
	b.WriteByte('\n')
	// The last slice with probes: the enqueues end before the completions.
	lastProbed := len(r.slices()) - 1
	for lastProbed > 0 && len(r.probesIn(lastProbed)) == 0 {
		lastProbed--
	}
	if first, last := r.probesIn(0), r.probesIn(lastProbed); len(first) > 0 && lastProbed > 0 {
		ls := r.slices()[lastProbed]
		fmt.Fprintf(&b, "enqueue latency, one job alone (jobs.Client.Enqueue, once a look): first slice p50 %s p99 %s (%d enqueues), "+
			"slice %s – %s p50 %s p99 %s (%d)\n", quantile(first, 0.5), quantile(first, 0.99), len(first),
			thousands(ls.from), thousands(ls.to), quantile(last, 0.5), quantile(last, 0.99), len(last))
	}
	fmt.Fprintf(&b, "overall: %s jobs in %s s: %s jobs/s (from the first look, %s completed then)\n\n",
		thousands(int64(r.form.jobs)), seconds(r.wall()),
		thousands(int64(float64(int64(r.form.jobs)-r.samples[0].completed)/r.wall().Seconds())),
		thousands(r.samples[0].completed))

	// The sizes at the start, the middle and the end.
	t = table{head: []string{"when", "table", "total", "heap", "indexes", "n_live_tup", "n_dead_tup", "dead/live", "autovacuums", "autoanalyzes"}}
	for _, at := range []sizes{r.sizesAt("start", 0), r.sizesAt("", int64(r.form.jobs/2)), r.sizesAt("end", 0)} {
		when := at.label
		if when != "start" && when != "end" {
			when = "middle (" + when + ")"
		}
		for _, ts := range at.tables {
			t.add(when, ts.name, pretty(ts.total), pretty(ts.heap), pretty(ts.indexes), thousands(ts.live), thousands(ts.dead),
				deadLive(ts), thousands(ts.autovacuums), thousands(ts.analyzes))
		}
	}
	b.WriteString("sizes (pg_total_relation_size, pg_relation_size, pg_indexes_size) and pg_stat_user_tables:\n")
	b.WriteString(t.String())
	b.WriteByte('\n')

	middle, end := r.sizesAt("", int64(r.form.jobs/2)), r.sizesAt("end", 0)
	t = table{head: []string{"table", "index", "middle", "end", "scans"}}
	for _, e := range end.indexes {
		if e.size <= 16<<10 {
			continue // empty, or nearly: the indexes this workload does not use
		}
		var m indexSize
		for _, x := range middle.indexes {
			if x.table == e.table && x.name == e.name {
				m = x
			}
		}
		t.add(e.table, e.name, pretty(m.size), pretty(e.size), thousands(e.scans))
	}
	b.WriteString("indexes over 16 kB at the end (pg_relation_size) in the middle and at the end, and their scans (idx_scan) by the end:\n")
	b.WriteString(t.String())
	b.WriteByte('\n')

	p := r.workers.prune
	if r.prune {
		wall := r.wall()
		fmt.Fprintf(&b, "prune: %s runs (%s removed something), %s jobs removed; time in docket.prune_run %s s, through commit %s s "+
			"(%.1f %% of the wall time, summed over %d workers); %.1f ms a run on average, longest %.1f ms; %.1f µs a job removed\n",
			thousands(int64(p.runs)), thousands(int64(p.busy)), thousands(p.removed), seconds(p.inFunc), seconds(p.total),
			100*p.total.Seconds()/wall.Seconds(), workers, ms(avg(p.total, p.runs)), ms(p.longest),
			float64(p.total.Microseconds())/float64(max(p.removed, 1)))
	}
	var took, longest time.Duration
	for _, sz := range r.sizes {
		took += sz.count.took
		longest = max(longest, sz.count.took)
	}
	fmt.Fprintf(&b, "the database's count: %d times, each %.1f ms on average, longest %.1f ms; %s looks at the workers' reports\n",
		len(r.sizes), ms(avg(took, len(r.sizes))), ms(longest), thousands(int64(len(r.samples))))
	fmt.Fprintf(&b, "end: %s jobs present (succeeded), %s pruned by %s prunes (%s events); %d remaining histories verified\n",
		thousands(r.checked.present), thousands(r.checked.pruned), thousands(r.checked.prunes),
		thousands(r.checked.prunedEvent), r.checked.verified)
	fmt.Fprintf(&b, "workers: %s successes reported, %d warnings logged, %d errors, %d data races, other sweeps moved %v\n",
		thousands(r.workers.succeeded), r.workers.warns, len(r.workers.errors), r.workers.races, r.workers.sweeps)
	return b.String()
}

// contrast is a table of the runs side by side.
func contrast(results []*result) string {
	t := table{head: []string{"run", "seconds", "jobs/s", "first slice", "second slice", "last slice", "slowest slice", "last/first",
		"buffers/job", "WAL/job", "jobs", "job_events", "event partitions", "prunes", "river_job", "prune time s"}}
	for _, r := range results {
		ss := r.slices()
		slowest := ss[0].rate()
		for _, s := range ss {
			slowest = min(slowest, s.rate())
		}
		start, end := r.sizesAt("start", 0), r.sizesAt("end", 0)
		t.add(pruneName(r.prune), seconds(r.wall()),
			thousands(int64(float64(int64(r.form.jobs)-r.samples[0].completed)/r.wall().Seconds())),
			thousands(int64(ss[0].rate())), thousands(int64(ss[min(1, len(ss)-1)].rate())), thousands(int64(ss[len(ss)-1].rate())),
			thousands(int64(slowest)),
			fmt.Sprintf("%.3f", r.ratio()), fmt.Sprintf("%.1f", float64(end.buffers-start.buffers)/float64(r.form.jobs)),
			fmt.Sprintf("%d B", (end.wal-start.wal)/int64(r.form.jobs)),
			pretty(end.table("docket.jobs").total), pretty(end.table("docket.job_events").total), strconv.Itoa(end.partitions),
			pretty(end.table("docket.prunes").total), pretty(end.table("docket.river_job").total),
			seconds(r.workers.prune.total))
	}
	return t.String()
}

// table is a Markdown table, its columns aligned.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) String() string {
	width := make([]int, len(t.head))
	for _, row := range append([][]string{t.head}, t.rows...) {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	line := func(row []string) {
		b.WriteByte('|')
		for i, c := range row {
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", width[i]-len([]rune(c))))
		}
		b.WriteByte('\n')
	}
	line(t.head)
	rule := make([]string, len(t.head))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
	}
	line(rule)
	for _, row := range t.rows {
		line(row)
	}
	return b.String()
}

// thousands is n with commas between its thousands.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// pretty is n as pg_size_pretty writes it: powers of 1024, kB, MB, GB.
func pretty(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 10<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

func avg(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

func deadLive(t tableSize) string {
	if t.live == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", float64(t.dead)/float64(t.live))
}

// probesIn returns the enqueue latencies timed during slice i, sorted.
func (r *result) probesIn(i int) []time.Duration {
	ss := r.slices()
	if i < 0 || i >= len(ss) {
		return nil
	}
	var out []time.Duration
	for _, p := range r.probes {
		if p.completed >= ss[i].from && p.completed < ss[i].to {
			out = append(out, p.took)
		}
	}
	slices.Sort(out)
	return out
}

// quantile is the q-quantile of sorted, rounded to 10 µs.
func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))].Round(10 * time.Microsecond)
}
