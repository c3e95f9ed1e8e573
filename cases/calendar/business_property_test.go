package calendar_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases/calendar"
)

// model is an independent, deliberately plain reading of a business-day
// configuration: dates are time.Time values at UTC midnight stepped with
// AddDate, and whether a date exists in the zone is found by sampling the
// clock every quarter hour. The property tests hold the calendar to it.
type model struct {
	loc      *time.Location
	weekend  map[time.Weekday]bool
	holidays map[string]bool
	cutoff   int // minutes after midnight

	mu     sync.Mutex
	exists map[string]bool
}

func newModel(t testing.TB, cfg calendar.BusinessDaysConfig) *model {
	t.Helper()
	loc, err := time.LoadLocation(cfg.Zone)
	require.NoError(t, err)
	m := &model{loc: loc, weekend: map[time.Weekday]bool{}, holidays: map[string]bool{}, exists: map[string]bool{}}
	weekend := cfg.Weekend
	if weekend == nil {
		weekend = []time.Weekday{time.Saturday, time.Sunday}
	}
	for _, d := range weekend {
		m.weekend[d] = true
	}
	for _, h := range cfg.Holidays {
		m.holidays[h] = true
	}
	cutoff := cfg.Cutoff
	if cutoff == "" {
		cutoff = "17:00"
	}
	hh, _ := strconv.Atoi(cutoff[:2])
	mm, _ := strconv.Atoi(cutoff[3:])
	m.cutoff = hh*60 + mm
	return m
}

// date is the local date of t in the model's zone, as UTC midnight.
func (m *model) date(t time.Time) time.Time {
	y, mo, d := t.In(m.loc).Date()
	return time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
}

func (m *model) working(d time.Time) bool {
	if m.weekend[d.Weekday()] || m.holidays[d.Format(time.DateOnly)] {
		return false
	}
	key := d.Format(time.DateOnly)
	m.mu.Lock()
	defer m.mu.Unlock()
	ok, seen := m.exists[key]
	if !seen {
		for u := d.Add(-15 * time.Hour); u.Before(d.Add(39 * time.Hour)); u = u.Add(15 * time.Minute) {
			if m.date(u).Equal(d) {
				ok = true
				break
			}
		}
		m.exists[key] = ok
	}
	return ok
}

// localReadings counts the instants at which the zone reads minute on date
// d, by trying every quarter-hour offset from -14h to +14h.
func (m *model) localReadings(d time.Time, minute int) int {
	wall := d.Add(time.Duration(minute) * time.Minute)
	n := 0
	for off := -14 * 60; off <= 14*60; off += 15 {
		u := wall.Add(-time.Duration(off) * time.Minute).In(m.loc)
		if _, got := u.Zone(); got == off*60 {
			n++
		}
	}
	return n
}

// received is the day from counts as received on: its own date when that is
// a working day and the local clock reads before the cut-off, else the next
// working day.
func (m *model) received(from time.Time) time.Time {
	local := from.In(m.loc)
	d := m.date(from)
	clock := time.Duration(local.Hour())*time.Hour + time.Duration(local.Minute())*time.Minute +
		time.Duration(local.Second())*time.Second + time.Duration(local.Nanosecond())
	if m.working(d) && clock < time.Duration(m.cutoff)*time.Minute {
		return d
	}
	for d = d.AddDate(0, 0, 1); !m.working(d); d = d.AddDate(0, 0, 1) {
	}
	return d
}

// check asserts everything a resolved deadline must satisfy: at the asked
// local time, on a working day, strictly after from, and exactly n working
// days after the day of receipt.
func (m *model) check(t testing.TB, from time.Time, n, at int, due time.Time) {
	t.Helper()
	if at < 0 {
		at = m.cutoff
	}
	local := due.In(m.loc)
	require.Equal(t, m.loc, due.Location())
	require.Equal(t, at, local.Hour()*60+local.Minute(), "deadline %v is not at %s", local, fmt.Sprintf("%02d:%02d", at/60, at%60))
	require.Zero(t, local.Second())
	require.Zero(t, local.Nanosecond())
	dueDate := m.date(due)
	require.True(t, m.working(dueDate), "deadline %v is not on a working day", local)
	require.True(t, due.After(from), "deadline %v is not after from %v", due, from)
	start := m.received(from)
	count := 0
	for d := start.AddDate(0, 0, 1); !d.After(dueDate); d = d.AddDate(0, 0, 1) {
		if m.working(d) {
			count++
		}
	}
	require.Equal(t, n, count, "from %v (received %s) to %v", from.In(m.loc), start.Format(time.DateOnly), local)
}

// propertyCalendars are the configurations the property and fuzz tests
// draw from: zones with whole-hour, half-hour and no daylight saving, weekends
// on Saturday-Sunday, Friday-Saturday, Saturday only and none, a date line
// move, and cut-offs the clocks skip or repeat.
var propertyCalendars = []calendar.BusinessDaysConfig{
	{Zone: "Europe/Berlin", Cutoff: "17:00", Holidays: []string{
		"2026-01-01", "2026-04-03", "2026-04-06", "2026-05-01", "2026-05-14", "2026-05-25", "2026-10-03", "2026-12-25", "2026-12-26",
		"2027-01-01", "2027-03-26", "2027-03-29", "2027-05-01", "2027-05-06", "2027-05-17", "2027-10-03", "2027-12-25", "2027-12-26",
		"2028-01-01", "2028-04-14", "2028-04-17", "2028-05-01", "2028-05-25", "2028-06-05", "2028-10-03", "2028-12-25", "2028-12-26",
	}},
	{Zone: "America/New_York", Cutoff: "17:00", Holidays: []string{
		"2026-01-01", "2026-05-25", "2026-07-03", "2026-09-07", "2026-11-26", "2026-12-25",
		"2027-01-01", "2027-05-31", "2027-07-05", "2027-09-06", "2027-11-11", "2027-11-25", "2027-12-24",
		"2028-01-17", "2028-05-29", "2028-07-04", "2028-09-04", "2028-11-23", "2028-12-25",
	}},
	{Zone: "Asia/Jerusalem", Weekend: []time.Weekday{time.Friday, time.Saturday}, Cutoff: "16:00"},
	{Zone: "Australia/Lord_Howe", Cutoff: "09:30"},
	{Zone: "Europe/Berlin", Weekend: []time.Weekday{time.Saturday}, Cutoff: "02:30"},
	{Zone: "America/New_York", Weekend: []time.Weekday{}, Cutoff: "01:30"},
	{Zone: "Pacific/Apia", Cutoff: "12:00"},
	{Zone: "UTC", Weekend: []time.Weekday{time.Sunday}, Cutoff: "00:00"},
	{Zone: "Asia/Kolkata", Cutoff: "23:59", Holidays: []string{"2027-01-26", "2027-08-15", "2027-10-02"}},
}

// Many random from instants and counts, on every property calendar: each
// answer satisfies the model, is the same when asked again, grows with the
// count, and each refusal is a daylight-saving one the model confirms.
func TestBusinessDaysProperties(t *testing.T) {
	t.Parallel()
	for i, cfg := range propertyCalendars {
		t.Run(fmt.Sprintf("%d_%s", i, cfg.Zone), func(t *testing.T) {
			t.Parallel()
			cal := newCalendar(t, cfg)
			m := newModel(t, cfg)
			rng := rand.New(rand.NewPCG(uint64(i), 2027))
			lo := time.Date(2009, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
			hi := time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
			resolved := 0
			for range 1500 {
				from := time.Unix(lo+rng.Int64N(hi-lo), rng.Int64N(1e9))
				if rng.IntN(4) == 0 { // often land near a transition's local hours
					from = from.Truncate(time.Hour).Add(time.Duration(rng.IntN(4)) * 15 * time.Minute)
				}
				n := 1 + rng.IntN(40)
				at, spec := -1, fmt.Sprintf("%d working days", n)
				if n == 1 {
					spec = "1 working day"
				}
				if rng.IntN(3) == 0 {
					at = rng.IntN(24 * 60)
					spec += fmt.Sprintf(" at %02d:%02d", at/60, at%60)
				}
				due, err := cal.Resolve(from, spec)
				if err != nil {
					requireRefused(t, err)
					checkRefusal(t, m, from, err)
					continue
				}
				resolved++
				m.check(t, from, n, at, due)

				again, err := cal.Resolve(from, spec)
				require.NoError(t, err)
				require.True(t, due.Equal(again))

				more := fmt.Sprintf("%d working days", n+1)
				if at >= 0 {
					more += fmt.Sprintf(" at %02d:%02d", at/60, at%60)
				}
				if later, err := cal.Resolve(from, more); err == nil {
					require.True(t, later.After(due), "%s: %v is not after %v", more, later, due)
				}
			}
			require.Greater(t, resolved, 1000)
		})
	}
}

// checkRefusal asserts a refusal of a well-formed spec has a reason the
// model confirms: the local time on the deadline's date is skipped or
// repeated, or from is inside a repeated cut-off.
func checkRefusal(t testing.TB, m *model, from time.Time, err error) {
	t.Helper()
	msg := err.Error()
	re := regexp.MustCompile(`(nonexistent|ambiguous) local time (\d\d):(\d\d) on (\d{4}-\d\d-\d\d)`)
	if sub := re.FindStringSubmatch(msg); sub != nil {
		d, perr := time.Parse(time.DateOnly, sub[4])
		require.NoError(t, perr)
		hh, _ := strconv.Atoi(sub[2])
		mm, _ := strconv.Atoi(sub[3])
		want := map[string]int{"nonexistent": 0, "ambiguous": 2}[sub[1]]
		require.Equal(t, want, m.localReadings(d, hh*60+mm), msg)
		return
	}
	if strings.Contains(msg, "two occurrences of the cut-off") {
		require.Equal(t, 2, m.localReadings(m.date(from), m.cutoff), msg)
		return
	}
	t.Fatalf("unexpected refusal: %v", err)
}

var specPattern = regexp.MustCompile(`^([1-9][0-9]{0,3}) (working|business) (day|days)(?: at ([01][0-9]|2[0-3]):([0-5][0-9]))?$`)

// FuzzBusinessDaysResolve: for any from, spec and property calendar,
// Resolve never panics; it answers only for a spec of the grammar, and then
// the answer satisfies the model and is the same when asked again; it
// refuses a spec of the grammar only for a reason the model confirms or for
// the calendar's range.
func FuzzBusinessDaysResolve(f *testing.F) {
	f.Add(int64(0), uint32(0), "5 working days", uint8(0))
	f.Add(int64(100_000_000), uint32(0), "5 working days at 17:00", uint8(0))
	f.Add(int64(101_000_000), uint32(5), "1 working day at 02:30", uint8(4))
	f.Add(int64(-50_000_000), uint32(0), "10 business days at 01:30", uint8(5))
	f.Add(int64(-375_000_000), uint32(0), "1 working day", uint8(6))
	f.Add(int64(7), uint32(999_999_999), "1000 working days", uint8(2))
	f.Add(int64(0), uint32(0), "5 days", uint8(1))
	f.Add(int64(0), uint32(0), "five working days", uint8(3))

	cals := make([]*calendar.BusinessDays, len(propertyCalendars))
	models := make([]*model, len(propertyCalendars))
	for i, cfg := range propertyCalendars {
		cals[i] = newCalendar(f, cfg)
		models[i] = newModel(f, cfg)
	}
	f.Fuzz(func(t *testing.T, sec int64, nsec uint32, spec string, which uint8) {
		i := int(which) % len(cals)
		cal, m := cals[i], models[i]
		// Instants within about 12.7 years of 2023-11, so most land in range.
		from := time.Unix(1_700_000_000+sec%400_000_000, int64(nsec%1_000_000_000))

		due, err := cal.Resolve(from, spec)
		sub := specPattern.FindStringSubmatch(spec)
		n := 0
		if sub != nil {
			n, _ = strconv.Atoi(sub[1])
		}
		grammatical := sub != nil && n <= calendar.MaxWorkingDays && (sub[3] == "day") == (n == 1)
		if err != nil {
			requireRefused(t, err)
			if grammatical && !strings.Contains(err.Error(), "known range") && !strings.Contains(err.Error(), "10000 days") {
				checkRefusal(t, m, from, err)
			}
			return
		}
		require.True(t, grammatical, "resolved a spec outside the grammar: %q", spec)
		at := -1
		if sub[4] != "" {
			hh, _ := strconv.Atoi(sub[4])
			mm, _ := strconv.Atoi(sub[5])
			at = hh*60 + mm
		}
		m.check(t, from, n, at, due)
		again, err := cal.Resolve(from, spec)
		require.NoError(t, err)
		require.True(t, due.Equal(again))
	})
}
