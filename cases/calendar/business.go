package calendar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docket-dev/docket/db"
)

// Bounds of a [BusinessDays] calendar.
const (
	// MaxWorkingDays is the largest count a business-day spec may name.
	MaxWorkingDays = 1000
	// MaxHolidays is the most holidays a calendar may list.
	MaxHolidays = 20000
	// MaxScanDays is how many calendar days past the day of from a
	// resolution may look at before refusing: about 27 years.
	MaxScanDays = 10000
)

// The widest known range a calendar may have, and its default.
const (
	earliestDate = "1970-01-01"
	latestDate   = "2199-12-31"
)

// DefaultCutoff is the cut-off of a [BusinessDaysConfig] that names none.
const DefaultCutoff = "17:00"

// BusinessDaysConfig describes a [BusinessDays] calendar. [NewBusinessDays]
// validates it and refuses what it cannot use exactly.
type BusinessDaysConfig struct {
	// Zone is the IANA name of the calendar's time zone, such as
	// "Europe/Berlin" or "America/New_York". Required; "Local" is refused,
	// since it means something different on every machine.
	Zone string
	// Weekend lists the days that are never working days. Nil defaults to
	// Saturday and Sunday; an empty, non-nil slice means no weekend. Listing
	// all seven days is refused.
	Weekend []time.Weekday
	// Holidays lists dates ("YYYY-MM-DD", local to Zone) that are not working
	// days. Order and duplicates do not matter. Each must lie within the
	// known range.
	Holidays []string
	// Cutoff is the local time ("HH:MM", 00:00 … 23:59) after which a request
	// counts as received on the next working day, and the deadline's time
	// when a spec names none. Defaults to [DefaultCutoff], 17:00.
	Cutoff string
	// KnownFrom and KnownThrough ("YYYY-MM-DD", inclusive) are the dates for
	// which Holidays is complete: a resolution that would need to classify
	// a date outside them is refused rather than guessed. Default to
	// 1970-01-01 and 2199-12-31, the widest range allowed.
	KnownFrom, KnownThrough string
}

// BusinessDays resolves working-day specs ("5 working days at 17:00") in one
// time zone with its weekend days, holidays and cut-off. The package
// documentation gives the grammar, the counting rule and the daylight-saving
// rules. A BusinessDays is immutable and safe for concurrent use.
type BusinessDays struct {
	cfg          BusinessDaysConfig // normalised: defaults applied, sorted
	loc          *time.Location
	weekend      [7]bool
	holidays     map[civilDate]struct{}
	cutoff       int // minutes after local midnight
	knownFrom    civilDate
	knownThrough civilDate
	digest       string
}

var _ Calendar = (*BusinessDays)(nil)

// NewBusinessDays returns the business-day calendar cfg describes. It
// refuses, with an error matching db.ErrInvalidArgument that says which, an
// empty, "Local" or unknown zone, a weekday out of range, a weekend of all
// seven days, a malformed or out-of-range date, a holiday outside the known
// range, more than [MaxHolidays] holidays, a known range that is empty or
// outside 1970-01-01 … 2199-12-31, and a malformed cut-off.
func NewBusinessDays(cfg BusinessDaysConfig) (*BusinessDays, error) {
	const op = "calendar.new_business_days"
	refuse := func(format string, args ...any) (*BusinessDays, error) {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf(format, args...))
	}
	c := &BusinessDays{holidays: make(map[civilDate]struct{}, len(cfg.Holidays))}

	switch {
	case cfg.Zone == "":
		return refuse("zone is empty: want an IANA name such as Europe/Berlin")
	case cfg.Zone == "Local":
		return refuse("zone %q is machine-specific: want an IANA name such as Europe/Berlin", cfg.Zone)
	case !validZoneName(cfg.Zone):
		return refuse("zone %q is not an IANA time-zone name", cfg.Zone)
	}
	loc, err := time.LoadLocation(cfg.Zone)
	if err != nil {
		return refuse("unknown time zone %q", cfg.Zone)
	}
	c.loc = loc

	weekend := cfg.Weekend
	if weekend == nil {
		weekend = []time.Weekday{time.Saturday, time.Sunday}
	}
	for _, d := range weekend {
		if d < time.Sunday || d > time.Saturday {
			return refuse("weekend day %d is not a weekday (0 Sunday … 6 Saturday)", int(d))
		}
		c.weekend[d] = true
	}
	normWeekend := []time.Weekday{}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if c.weekend[d] {
			normWeekend = append(normWeekend, d)
		}
	}
	if len(normWeekend) == 7 {
		return refuse("weekend has all seven days: the calendar would have no working day")
	}

	earliest, _ := parseCivilDate(earliestDate)
	latest, _ := parseCivilDate(latestDate)
	c.knownFrom, c.knownThrough = earliest, latest
	if cfg.KnownFrom != "" {
		d, ok := parseCivilDate(cfg.KnownFrom)
		if !ok {
			return refuse("known-from date %q is not a YYYY-MM-DD date", cfg.KnownFrom)
		}
		c.knownFrom = d
	}
	if cfg.KnownThrough != "" {
		d, ok := parseCivilDate(cfg.KnownThrough)
		if !ok {
			return refuse("known-through date %q is not a YYYY-MM-DD date", cfg.KnownThrough)
		}
		c.knownThrough = d
	}
	if c.knownFrom < earliest || c.knownThrough > latest {
		return refuse("known range %s … %s reaches outside %s … %s", c.knownFrom, c.knownThrough, earliestDate, latestDate)
	}
	if c.knownFrom > c.knownThrough {
		return refuse("known range %s … %s is empty", c.knownFrom, c.knownThrough)
	}

	if len(cfg.Holidays) > MaxHolidays {
		return refuse("%d holidays, more than %d", len(cfg.Holidays), MaxHolidays)
	}
	for _, h := range cfg.Holidays {
		d, ok := parseCivilDate(h)
		if !ok {
			return refuse("holiday %q is not a YYYY-MM-DD date", h)
		}
		if d < c.knownFrom || d > c.knownThrough {
			return refuse("holiday %s is outside the known range %s … %s", d, c.knownFrom, c.knownThrough)
		}
		c.holidays[d] = struct{}{}
	}
	normHolidays := make([]string, 0, len(c.holidays))
	for d := range c.holidays {
		normHolidays = append(normHolidays, d.String())
	}
	slices.Sort(normHolidays) // YYYY-MM-DD sorts as it reads

	cutoff := cfg.Cutoff
	if cutoff == "" {
		cutoff = DefaultCutoff
	}
	m, ok := parseClock(cutoff)
	if !ok {
		return refuse("cut-off %q is not HH:MM between 00:00 and 23:59", cfg.Cutoff)
	}
	c.cutoff = m

	c.cfg = BusinessDaysConfig{
		Zone:         cfg.Zone,
		Weekend:      normWeekend,
		Holidays:     normHolidays,
		Cutoff:       cutoff,
		KnownFrom:    c.knownFrom.String(),
		KnownThrough: c.knownThrough.String(),
	}
	c.digest = digestOf(c.canonical())
	return c, nil
}

// Config returns the calendar's rules, normalised: defaults applied, weekend
// days and holidays sorted and deduplicated. NewBusinessDays(c.Config())
// builds a calendar with the same digest.
func (c *BusinessDays) Config() BusinessDaysConfig {
	cfg := c.cfg
	cfg.Weekend = slices.Clone(c.cfg.Weekend)
	cfg.Holidays = slices.Clone(c.cfg.Holidays)
	return cfg
}

// Location returns the calendar's time zone.
func (c *BusinessDays) Location() *time.Location { return c.loc }

// Digest returns "sha256:" and the hex SHA-256 of the calendar's canonical
// rules: kind and version, zone name, weekend, holidays, cut-off and known
// range.
func (c *BusinessDays) Digest() string { return c.digest }

// canonical is the versioned encoding the digest is taken over: one rule a
// line, values from fixed alphabets that contain no spaces or newlines.
func (c *BusinessDays) canonical() string {
	var b strings.Builder
	b.WriteString("docket.calendar.business-days/v1\n")
	b.WriteString("zone " + c.cfg.Zone + "\n")
	b.WriteString("weekend")
	for _, d := range c.cfg.Weekend {
		b.WriteString(" " + strconv.Itoa(int(d)))
	}
	b.WriteString("\nholidays")
	for _, h := range c.cfg.Holidays {
		b.WriteString(" " + h)
	}
	b.WriteString("\ncutoff " + c.cfg.Cutoff + "\n")
	b.WriteString("known " + c.cfg.KnownFrom + " " + c.cfg.KnownThrough + "\n")
	return b.String()
}

// Resolve returns the deadline spec names, counted from from, in the
// calendar's zone. It refuses, with an error matching db.ErrInvalidArgument
// that says which, a spec outside the grammar or with a count outside
// 1 … [MaxWorkingDays]; a deadline time that does not exist on the
// deadline's date or occurs twice there (daylight saving); a from between
// the two occurrences of a repeated cut-off; a count that reaches outside
// the known range or past [MaxScanDays].
func (c *BusinessDays) Resolve(from time.Time, spec string) (time.Time, error) {
	const op = "calendar.business_days.resolve"
	refuse := func(format string, args ...any) (time.Time, error) {
		return time.Time{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf(format, args...))
	}
	n, at, msg := parseWorkingDays(spec)
	if msg != "" {
		return refuse("%s", msg)
	}
	if at < 0 {
		at = c.cutoff
	}
	day := civilOf(from.In(c.loc))
	if day < c.knownFrom || day > c.knownThrough {
		return refuse("from's local date %s is outside the calendar's known range %s … %s", day, c.knownFrom, c.knownThrough)
	}
	first := day

	// The day of receipt: day itself when it is a working day and from is
	// before its cut-off, else the next working day.
	onTheDay := false
	if c.working(day) {
		var ambiguous bool
		if onTheDay, ambiguous = c.beforeCutoff(from, day); ambiguous {
			return refuse("from %s falls between the two occurrences of the cut-off %s on %s in %s (clocks go back): whether it is before the cut-off is ambiguous",
				from.In(c.loc).Format(time.RFC3339), formatClock(c.cutoff), day, c.cfg.Zone)
		}
	}
	if !onTheDay {
		var ok bool
		if day, ok = c.nextWorking(day, first); !ok {
			return refuse("no working day after %s within the calendar's known range (through %s) or %d days", first, c.knownThrough, MaxScanDays)
		}
	}
	for i := 0; i < n; i++ {
		var ok bool
		if day, ok = c.nextWorking(day, first); !ok {
			return refuse("%d working days from %s reach past the calendar's known range (through %s) or %d days", n, first, c.knownThrough, MaxScanDays)
		}
	}

	due := c.instantsAt(day, at)
	switch len(due) {
	case 0:
		return refuse("nonexistent local time %s on %s in %s: the clocks skip it (daylight saving)", formatClock(at), day, c.cfg.Zone)
	case 1:
	default:
		return refuse("ambiguous local time %s on %s in %s: it occurs twice, at UTC offsets %s and %s (daylight saving)",
			formatClock(at), day, c.cfg.Zone, due[0].Format("-07:00"), due[1].Format("-07:00"))
	}
	if !due[0].After(from) {
		// Unreachable in real zones; a guarantee rather than an assumption.
		return refuse("deadline %s is not after from %s", due[0].Format(time.RFC3339), from.In(c.loc).Format(time.RFC3339))
	}
	return due[0], nil
}

// beforeCutoff reports whether from, on local date day, is strictly before
// the cut-off, deciding by instants. When the clocks skip the cut-off, the
// local clock reading decides (it is monotone across a skip). When they
// repeat it, a from between the two occurrences is ambiguous.
func (c *BusinessDays) beforeCutoff(from time.Time, day civilDate) (before, ambiguous bool) {
	cut := c.instantsAt(day, c.cutoff)
	switch len(cut) {
	case 0:
		local := from.In(c.loc)
		midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
		clock := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), local.Nanosecond(), time.UTC)
		return clock.Sub(midnight) < time.Duration(c.cutoff)*time.Minute, false
	case 1:
		return from.Before(cut[0]), false
	default:
		if from.Before(cut[0]) {
			return true, false
		}
		return false, from.Before(cut[len(cut)-1])
	}
}

// working reports whether d is a working day: not a weekend day, not a
// holiday, and a date the zone's clocks read at all.
func (c *BusinessDays) working(d civilDate) bool {
	if c.weekend[d.weekday()] {
		return false
	}
	if _, holiday := c.holidays[d]; holiday {
		return false
	}
	return c.exists(d)
}

// nextWorking returns the first working day after d, if it lies within the
// known range and within MaxScanDays of first.
func (c *BusinessDays) nextWorking(d, first civilDate) (civilDate, bool) {
	for {
		d++
		if d > c.knownThrough || d-first > MaxScanDays {
			return 0, false
		}
		if c.working(d) {
			return d, true
		}
	}
}

// instantsAt returns, in order, every instant at which the calendar's zone
// reads local time minute (minutes after midnight) on day d: none when the
// clocks skip it, two when they repeat it. For each period of constant UTC
// offset around the wall time, the candidate is the wall time less that
// offset, kept if it lies inside the period.
func (c *BusinessDays) instantsAt(d civilDate, minute int) []time.Time {
	wall := int64(d)*86400 + int64(minute)*60 // the local reading, as seconds on a UTC clock
	var out []time.Time
	for _, p := range c.periodsAround(wall) {
		if u := wall - int64(p.offset); p.start <= u && u < p.end {
			t := time.Unix(u, 0).In(c.loc)
			if !slices.ContainsFunc(out, t.Equal) {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// exists reports whether the zone's clocks read day d at any instant. A date
// line move skips a whole date (Pacific/Apia skipped 2011-12-30); a date
// nobody lived through is no working day.
func (c *BusinessDays) exists(d civilDate) bool {
	first := int64(d) * 86400 // the day's wall interval is [first, first+86400)
	for _, p := range c.periodsAround(first + 43200) {
		if p.start+int64(p.offset) < first+86400 && first < p.end+int64(p.offset) {
			return true
		}
	}
	return false
}

// zonePeriod is a stretch of instants [start, end), in Unix seconds, over
// which the zone's UTC offset is constant.
type zonePeriod struct {
	start, end int64
	offset     int // seconds east of UTC
}

// periodWindow is how far around a wall time periodsAround looks: more than
// any UTC offset, so every instant that can read the wall time is covered.
const periodWindow = 2 * 86400

// periodsAround returns the zone's periods of constant offset that cover the
// instants within periodWindow of wall, read from the zone's transitions
// (not from time.Date's normalisation), clipped to the window.
func (c *BusinessDays) periodsAround(wall int64) []zonePeriod {
	lo, hi := wall-periodWindow, wall+periodWindow
	var out []zonePeriod
	t := time.Unix(lo, 0).In(c.loc)
	for start := lo; start < hi && len(out) < 64; { // a zone changes offset a few times in four days at most
		_, offset := t.Zone()
		_, next := t.ZoneBounds()
		end := hi
		if !next.IsZero() && next.Unix() < hi {
			end = next.Unix()
		}
		if end <= start { // defensive: ZoneBounds always moves forward
			break
		}
		out = append(out, zonePeriod{start: start, end: end, offset: offset})
		start = end
		t = time.Unix(end, 0).In(c.loc)
	}
	return out
}

// parseWorkingDays parses a business-day spec. It returns the count and the
// deadline's minutes after midnight (-1 when the spec names no time), or a
// refusal message saying what is wrong with spec.
func parseWorkingDays(spec string) (n, at int, msg string) {
	const want = `want "N working days" or "N working days at HH:MM"`
	if spec == "" {
		return 0, 0, "empty spec: " + want
	}
	if len(spec) > maxSpecLen {
		return 0, 0, fmt.Sprintf("spec is %d bytes, longer than %d", len(spec), maxSpecLen)
	}
	words := strings.Split(spec, " ")
	if len(words) == 2 && (words[1] == "day" || words[1] == "days") ||
		len(words) == 3 && words[1] == "calendar" {
		return 0, 0, fmt.Sprintf("spec %q counts calendar days: this calendar counts working days (%s); for elapsed time give hours to a durations calendar", spec, want)
	}
	if len(words) != 3 && len(words) != 5 || len(words) == 5 && words[3] != "at" ||
		words[1] != "working" && words[1] != "business" || words[2] != "day" && words[2] != "days" {
		return 0, 0, fmt.Sprintf("spec %q is not a working-day spec: %s", spec, want)
	}
	count := words[0]
	for i := 0; i < len(count); i++ {
		if count[i] < '0' || count[i] > '9' {
			return 0, 0, fmt.Sprintf("spec %q: count %q is not a decimal number", spec, count)
		}
	}
	switch {
	case count == "":
		return 0, 0, fmt.Sprintf("spec %q has no count: %s", spec, want)
	case len(count) > 1 && count[0] == '0':
		return 0, 0, fmt.Sprintf("spec %q: count %q has a leading zero", spec, count)
	case len(count) > 4:
		return 0, 0, fmt.Sprintf("spec %q: count %s is outside 1 … %d", spec, count, MaxWorkingDays)
	}
	n, _ = strconv.Atoi(count)
	if n < 1 || n > MaxWorkingDays {
		return 0, 0, fmt.Sprintf("spec %q: count %d is outside 1 … %d", spec, n, MaxWorkingDays)
	}
	unit := "days"
	if n == 1 {
		unit = "day"
	}
	if words[2] != unit {
		return 0, 0, fmt.Sprintf("spec %q: the unit agrees with the count; write %q", spec, count+" "+words[1]+" "+unit+suffix(words))
	}
	at = -1
	if len(words) == 5 {
		var ok bool
		if at, ok = parseClock(words[4]); !ok {
			return 0, 0, fmt.Sprintf("spec %q: deadline time %q is not HH:MM between 00:00 and 23:59", spec, words[4])
		}
	}
	return n, at, ""
}

// suffix is the " at HH:MM" part of a split spec, or "".
func suffix(words []string) string {
	if len(words) == 5 {
		return " at " + words[4]
	}
	return ""
}

// parseClock parses "HH:MM" (00:00 … 23:59, two digits each) into minutes
// after midnight.
func parseClock(s string) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	for _, i := range []int{0, 1, 3, 4} {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	h := int(s[0]-'0')*10 + int(s[1]-'0')
	m := int(s[3]-'0')*10 + int(s[4]-'0')
	if h > 23 || m > 59 {
		return 0, false
	}
	return h*60 + m, true
}

// formatClock renders minutes after midnight as HH:MM.
func formatClock(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

// validZoneName reports whether name is spelled like an IANA zone name:
// letters, digits, '/', '_', '-' and '+', no empty or dot path elements.
func validZoneName(name string) bool {
	if len(name) > 64 {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '+') {
				return false
			}
		}
	}
	return true
}

// civilDate is a calendar date, as days since 1970-01-01.
type civilDate int

// parseCivilDate parses "YYYY-MM-DD", refusing impossible dates such as
// 2027-02-30.
func parseCivilDate(s string) (civilDate, bool) {
	if len(s) != 10 {
		return 0, false
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, false
	}
	return civilDate(t.Unix() / 86400), true
}

// civilOf returns the date t reads in its own location.
func civilOf(t time.Time) civilDate {
	y, m, d := t.Date()
	return civilDate(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

func (d civilDate) weekday() time.Weekday { return time.Weekday((int(d)%7 + 4 + 7) % 7) } // 1970-01-01 was a Thursday

func (d civilDate) String() string {
	return time.Unix(int64(d)*86400, 0).UTC().Format(time.DateOnly)
}
