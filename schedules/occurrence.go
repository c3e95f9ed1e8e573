package schedules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/docket-dev/docket/db"
)

// SearchHorizon bounds every search for an occurrence: [Next] looks no
// further than this past its cursor (ten years, so a leap day on a given
// weekday is always found).
const SearchHorizon = 10 * 366 * 24 * time.Hour

// ErrNoOccurrence is what [Next] returns when the expression matches no
// local time within [SearchHorizon] of the cursor, such as "0 0 30 2 *".
var ErrNoOccurrence = errors.New("no occurrence within the search horizon")

// Cron is a parsed five-field cron expression (minute, hour, day of month,
// month, day of week), as [ParseCron] returns it.
type Cron struct {
	expr      string
	spec      *cron.SpecSchedule
	fixedTime bool
}

// String returns the expression as it was given.
func (c Cron) String() string { return c.expr }

// FixedTime reports whether the expression names fixed times of day: neither
// its minute nor its hour field is * or */n. A fixed-time schedule runs a
// local time that falls in a spring-forward gap at the first instant after
// the gap, and a repeated local time once, at its first occurrence. Any
// other schedule is interval-like: it has no run inside a gap, and runs a
// repeated local time at both occurrences.
func (c Cron) FixedTime() bool { return c.fixedTime }

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a standard five-field cron expression, or one of the
// descriptors @yearly, @annually, @monthly, @weekly, @daily, @midnight and
// @hourly. It refuses, with [db.ErrInvalidArgument] naming the field "cron",
// anything else: a malformed expression, @every (use */n), and a TZ= or
// CRON_TZ= prefix (a schedule's zone is a field of its own).
func ParseCron(expr string) (Cron, error) {
	refuse := func(why string) (Cron, error) {
		return Cron{}, db.Refuse(db.ErrInvalidArgument, "schedules.parse_cron", fmt.Sprintf("invalid cron %q: %s", expr, why))
	}
	if len(expr) == 0 || len(expr) > MaxCron {
		return refuse(fmt.Sprintf("want 1..%d characters", MaxCron))
	}
	trimmed := strings.TrimSpace(expr)
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return refuse("the zone is a field of its own, not a prefix")
	}
	if strings.HasPrefix(trimmed, "@every") {
		return refuse("@every is not supported; write */n in the minute or hour field")
	}
	s, err := cronParser.Parse(trimmed)
	if err != nil {
		return refuse(err.Error())
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return refuse("not a calendar expression")
	}
	fields := strings.Fields(trimmed)
	if strings.HasPrefix(trimmed, "@") {
		fields = strings.Fields(descriptors[trimmed])
	}
	return Cron{expr: expr, spec: spec, fixedTime: !intervalField(fields[0]) && !intervalField(fields[1])}, nil
}

// descriptors are the five fields each accepted descriptor stands for.
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// intervalField reports whether a minute or hour field is * or */n (or has
// one among its comma-separated parts).
func intervalField(f string) bool {
	for part := range strings.SplitSeq(f, ",") {
		if part == "*" || part == "?" || strings.HasPrefix(part, "*/") || strings.HasPrefix(part, "?/") {
			return true
		}
	}
	return false
}

// Occurrence is one run of a schedule. Its identity is (schedule, Local,
// Fold); At is the instant it resolves to.
type Occurrence struct {
	// Local is the local date-time the expression matched, in the
	// schedule's zone, carried as a time.Time in UTC whose fields are that
	// wall clock (never an instant). For a run moved out of a spring-forward
	// gap it is the nonexistent local time that was matched.
	Local time.Time
	// Fold is 0 for the first occurrence of a local time and 1 for the
	// second, in a fall-back overlap.
	Fold int
	// At is the instant, in UTC.
	At time.Time
}

func (o Occurrence) String() string {
	return fmt.Sprintf("%s fold %d at %s", o.Local.Format("2006-01-02T15:04"), o.Fold, o.At.Format(time.RFC3339))
}

// Next returns the first occurrence of c in loc strictly after the instant
// after, by the rules [Cron.FixedTime] describes. It walks the zone's
// offsets segment by segment (time.Time.ZoneBounds) and matches wall-clock
// minutes within each, so it never relies on time.Date's normalisation of
// nonexistent or repeated local times. It returns [ErrNoOccurrence] when
// nothing matches within [SearchHorizon], and an error when a computation
// would not advance past after (which would be a defect, never a result).
func Next(c Cron, loc *time.Location, after time.Time) (Occurrence, error) {
	if c.spec == nil || loc == nil {
		return Occurrence{}, db.Refuse(db.ErrInvalidArgument, "schedules.next", "no expression or no zone")
	}
	after = after.UTC()
	horizon := after.Add(SearchHorizon)
	first := true
	for t := after; t.Before(horizon); {
		lt := t.In(loc)
		_, off := lt.Zone()
		start, end := lt.ZoneBounds()
		if end.IsZero() || end.After(horizon) {
			end = horizon
		}
		if !first && start.Before(t) {
			// Where the zone's table hands over to its rule (2038 in many
			// zones), ZoneBounds may start a segment before the previous
			// one ended: this segment starts where that one ended.
			start = t
		}
		// repeatedUntil is the wall clock the previous segment reached when
		// it ran later than this one starts: local times before it are
		// seen a second time here (fold 1).
		var repeatedUntil time.Time
		if !start.IsZero() {
			_, prevOff := start.Add(-time.Nanosecond).In(loc).Zone()
			switch {
			case prevOff > off:
				repeatedUntil = wall(start, prevOff)
			case prevOff < off && !first && c.fixedTime:
				// A gap begins this segment: a fixed-time match inside it
				// runs once, at the first instant after it.
				if l, ok := c.match(ceilMinute(wall(start, prevOff)), wall(start, off)); ok {
					return advancing(after, Occurrence{Local: l, Fold: 0, At: start.UTC()})
				}
			}
		}
		lo := ceilMinute(wall(start, off))
		if first {
			lo = wall(after, off).Truncate(time.Minute).Add(time.Minute)
		}
		if c.fixedTime && lo.Before(repeatedUntil) {
			// A fixed time runs at its first occurrence only.
			lo = ceilMinute(repeatedUntil)
		}
		if l, ok := c.match(lo, wall(end, off)); ok {
			fold := 0
			if l.Before(repeatedUntil) {
				fold = 1
			}
			return advancing(after, Occurrence{Local: l, Fold: fold, At: l.Add(-time.Duration(off) * time.Second)})
		}
		t, first = end, false
	}
	return Occurrence{}, fmt.Errorf("schedules: %q after %s: %w", c.expr, after.Format(time.RFC3339), ErrNoOccurrence)
}

// advancing returns o, or an error if o is not strictly after after.
func advancing(after time.Time, o Occurrence) (Occurrence, error) {
	if !o.At.After(after) {
		return Occurrence{}, fmt.Errorf("schedules: next occurrence %s does not advance past %s", o, after.Format(time.RFC3339Nano))
	}
	return o, nil
}

// wall is the wall clock at instant t under offset off seconds east of UTC,
// as a time.Time in UTC carrying those fields.
func wall(t time.Time, off int) time.Time {
	return t.UTC().Add(time.Duration(off) * time.Second)
}

func ceilMinute(w time.Time) time.Time {
	if m := w.Truncate(time.Minute); !m.Equal(w) {
		return m.Add(time.Minute)
	}
	return w
}

// match returns the first wall-clock minute in [lo, hi) the expression
// matches. lo is a whole minute. It walks in UTC, where calendar arithmetic
// has no gaps or overlaps, skipping a month, a day or an hour at a time
// where a coarser field does not match.
func (c Cron) match(lo, hi time.Time) (time.Time, bool) {
	s := c.spec
	for t := lo; t.Before(hi); {
		switch {
		case 1<<uint(t.Month())&s.Month == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !dayMatches(s, t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		case 1<<uint(t.Hour())&s.Hour == 0:
			t = t.Truncate(time.Hour).Add(time.Hour)
		case 1<<uint(t.Minute())&s.Minute == 0:
			t = t.Add(time.Minute)
		default:
			return t, true
		}
	}
	return time.Time{}, false
}

// starBit marks a field written as * (robfig/cron's convention).
const starBit = 1 << 63

// dayMatches is cron's day rule: when both the day-of-month and day-of-week
// fields are restricted, either may match; otherwise both must.
func dayMatches(s *cron.SpecSchedule, t time.Time) bool {
	dom := 1<<uint(t.Day())&s.Dom > 0
	dow := 1<<uint(t.Weekday())&s.Dow > 0
	if s.Dom&starBit > 0 || s.Dow&starBit > 0 {
		return dom && dow
	}
	return dom || dow
}
