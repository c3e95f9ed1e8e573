package schedules

import (
	"time"
)

// MaxRunsPerSweep bounds the occurrences one sweep materializes for one
// schedule; a schedule with more due goes on at the next sweep.
const MaxRunsPerSweep = 1000

// maxWalk bounds the occurrences one sweep walks past for one schedule. An
// outage longer than that (100,000 minutes of a per-minute schedule) is
// caught up over several sweeps, each recording what it skipped.
const maxWalk = 100_000

// Skipped is a missed window the catch-up policy did not run: Count
// occurrences from First to Last.
type Skipped struct {
	Policy CatchUp     `json:"policy"`
	Count  int         `json:"count"`
	First  skippedEdge `json:"first"`
	Last   skippedEdge `json:"last"`
}

type skippedEdge struct {
	Local string    `json:"local_time"`
	Fold  int       `json:"fold"`
	At    time.Time `json:"at"`
}

func edge(o Occurrence) skippedEdge {
	return skippedEdge{Local: o.Local.Format("2006-01-02T15:04"), Fold: o.Fold, At: o.At}
}

// plan is what one sweep does to one schedule.
type plan struct {
	runs    []Occurrence
	skipped []Skipped
	cursor  time.Time   // where the cursor moves
	next    *Occurrence // the next occurrence after it; nil: finished
}

// terms are what planning reads of a schedule.
type terms struct {
	cron           Cron
	loc            *time.Location
	catchUp        CatchUp
	maxCatchUp     int
	grace          time.Duration
	endsAt         time.Time // zero: none
	maxOccurrences int64     // zero: none
	runs           int64
	cursor         time.Time
}

// nextWithin returns the next occurrence after after within the bounds, or
// nil when there is none (past the end, the last run taken, or nothing
// within the search horizon).
func (t terms) nextWithin(after time.Time, runs int64) (*Occurrence, error) {
	if t.maxOccurrences > 0 && runs >= t.maxOccurrences {
		return nil, nil
	}
	o, err := Next(t.cron, t.loc, after)
	if err != nil {
		if isNoOccurrence(err) {
			return nil, nil
		}
		return nil, err
	}
	if !t.endsAt.IsZero() && o.At.After(t.endsAt) {
		return nil, nil
	}
	return &o, nil
}

// planSweep decides what a sweep at now does to a schedule with terms t:
// occurrences due at now (at or before it) that are no later than the
// grace are on time and run; older ones are missed, and the catch-up
// policy decides: skip runs none of them, one runs the latest, all runs the
// latest max_catch_up. The plan runs at most MaxRunsPerSweep occurrences in
// all: where the on-time and the caught-up ones together are more, the
// oldest caught-up ones are skipped. Missed occurrences not run are
// reported as one skipped window. The cursor moves to the last due
// occurrence walked.
func planSweep(t terms, now time.Time) (plan, error) {
	keep := 0
	switch t.catchUp {
	case CatchUpOne:
		keep = 1
	case CatchUpAll:
		keep = t.maxCatchUp
	}
	var (
		missed     []Occurrence // the latest keep+1 missed, oldest first
		missedN    int
		firstMiss  Occurrence
		onTime     []Occurrence
		cursor     = t.cursor
		walked     int
		exhausted  bool // the walk reached an occurrence not yet due, or the end
		finishedAt bool // the bounds end the schedule
	)
	for walked < maxWalk && len(onTime) < MaxRunsPerSweep {
		o, err := t.nextWithin(cursor, t.runs+int64(len(onTime)))
		if err != nil {
			return plan{}, err
		}
		if o == nil {
			exhausted, finishedAt = true, true
			break
		}
		if o.At.After(now) {
			exhausted = true
			break
		}
		walked++
		cursor = o.At
		if now.Sub(o.At) <= t.grace {
			onTime = append(onTime, *o)
			continue
		}
		if missedN == 0 {
			firstMiss = *o
		}
		missedN++
		missed = append(missed, *o)
		if len(missed) > keep+1 {
			missed = missed[1:]
		}
	}
	p := plan{cursor: cursor}
	// Runs for the missed: the latest keep of them, but only once the walk
	// has reached the present, so a long outage caught up over several
	// sweeps runs the latest, not the middle.
	var caught []Occurrence
	if exhausted || len(onTime) > 0 {
		caught = missed[max(0, len(missed)-keep):]
	}
	// A sweep runs at most MaxRunsPerSweep occurrences of a schedule, the
	// bound schedule_advance holds it to: the on-time ones first, then the
	// latest caught-up ones that still fit. The oldest that do not are
	// skipped with the rest of the missed window.
	if over := len(caught) + len(onTime) - MaxRunsPerSweep; over > 0 {
		caught = caught[over:]
	}
	if n := missedN - len(caught); n > 0 {
		last := missed[len(missed)-1]
		if len(caught) > 0 {
			last = missed[len(missed)-len(caught)-1]
		}
		p.skipped = append(p.skipped, Skipped{Policy: t.catchUp, Count: n, First: edge(firstMiss), Last: edge(last)})
	}
	p.runs = append(append(p.runs, caught...), onTime...)
	if t.maxOccurrences > 0 && t.runs+int64(len(p.runs)) > t.maxOccurrences {
		p.runs = p.runs[:t.maxOccurrences-t.runs]
	}
	if finishedAt {
		return p, nil
	}
	next, err := t.nextWithin(cursor, t.runs+int64(len(p.runs)))
	if err != nil {
		return plan{}, err
	}
	p.next = next
	return p, nil
}
