package calendar_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases/calendar"
	"github.com/docket-dev/docket/db"
)

// newCalendar builds a business-day calendar or fails the test.
func newCalendar(t testing.TB, cfg calendar.BusinessDaysConfig) *calendar.BusinessDays {
	t.Helper()
	cal, err := calendar.NewBusinessDays(cfg)
	require.NoError(t, err)
	return cal
}

// utc is a UTC instant to the minute.
func utc(y int, m time.Month, d, hh, mm int) time.Time {
	return time.Date(y, m, d, hh, mm, 0, 0, time.UTC)
}

// requireRefused asserts err is a DK010 refusal whose message contains each
// of parts.
func requireRefused(t testing.TB, err error, parts ...string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, db.ErrInvalidArgument), "want ErrInvalidArgument, got %v", err)
	for _, p := range parts {
		require.Contains(t, err.Error(), p)
	}
}

// Five working days at 17:00 across both daylight-saving changes of 2027,
// with and without holidays, in Berlin and New York: the UTC instants are
// written out, so an hour's slip at a transition fails here.
func TestBusinessDaysAcrossDST(t *testing.T) {
	t.Parallel()

	berlin := newCalendar(t, calendar.BusinessDaysConfig{Zone: "Europe/Berlin", Cutoff: "17:00"})
	berlinEaster := newCalendar(t, calendar.BusinessDaysConfig{
		Zone:     "Europe/Berlin",
		Cutoff:   "17:00",
		Holidays: []string{"2027-03-26", "2027-03-29", "2027-11-01"}, // Good Friday, Easter Monday, All Saints
	})
	newYork := newCalendar(t, calendar.BusinessDaysConfig{Zone: "America/New_York", Cutoff: "17:00"})
	newYorkHolidays := newCalendar(t, calendar.BusinessDaysConfig{
		Zone:     "America/New_York",
		Cutoff:   "17:00",
		Holidays: []string{"2027-07-05", "2027-11-11"}, // Independence Day observed, Veterans Day
	})

	tests := []struct {
		name string
		cal  *calendar.BusinessDays
		from time.Time
		spec string
		want time.Time
	}{
		// Berlin springs forward on Sunday 2027-03-28: 17:00 CET is 16:00Z, 17:00 CEST 15:00Z.
		{"berlin spring from Wednesday morning", berlin, utc(2027, 3, 24, 9, 0), "5 working days", utc(2027, 3, 31, 15, 0)},
		{"berlin spring at 17:00 named", berlin, utc(2027, 3, 24, 9, 0), "5 working days at 17:00", utc(2027, 3, 31, 15, 0)},
		{"berlin spring from Thursday after cut-off", berlin, utc(2027, 3, 25, 17, 0), "5 working days", utc(2027, 4, 2, 15, 0)},
		{"berlin spring one day, Friday to Monday", berlin, utc(2027, 3, 26, 8, 0), "1 working day", utc(2027, 3, 29, 15, 0)},
		{"berlin spring exactly at cut-off counts as after", berlin, utc(2027, 3, 25, 16, 0), "1 working day", utc(2027, 3, 29, 15, 0)},
		{"berlin spring a minute before cut-off", berlin, utc(2027, 3, 25, 15, 59), "1 working day", utc(2027, 3, 26, 16, 0)},
		{"berlin spring from Saturday", berlin, utc(2027, 3, 27, 10, 0), "5 working days", utc(2027, 4, 5, 15, 0)},
		{"berlin spring from the transition instant", berlin, utc(2027, 3, 28, 1, 0), "1 business day", utc(2027, 3, 30, 15, 0)},
		// Good Friday and Easter Monday around the same weekend.
		{"berlin easter from Wednesday", berlinEaster, utc(2027, 3, 24, 9, 0), "5 working days", utc(2027, 4, 2, 15, 0)},
		{"berlin easter from Thursday after cut-off", berlinEaster, utc(2027, 3, 25, 17, 30), "5 working days", utc(2027, 4, 6, 15, 0)},
		{"berlin easter from Good Friday", berlinEaster, utc(2027, 3, 26, 9, 0), "1 working day", utc(2027, 3, 31, 15, 0)},
		{"berlin easter deadline at noon", berlinEaster, utc(2027, 3, 24, 9, 0), "5 working days at 12:00", utc(2027, 4, 2, 10, 0)},
		// Berlin falls back on Sunday 2027-10-31.
		{"berlin autumn from Wednesday", berlin, utc(2027, 10, 27, 7, 0), "5 working days", utc(2027, 11, 3, 16, 0)},
		{"berlin autumn from Thursday", berlin, utc(2027, 10, 28, 7, 0), "5 working days", utc(2027, 11, 4, 16, 0)},
		{"berlin autumn Friday to Monday", berlin, utc(2027, 10, 29, 7, 0), "1 working day", utc(2027, 11, 1, 16, 0)},
		{"berlin autumn All Saints skipped", berlinEaster, utc(2027, 10, 27, 7, 0), "5 working days", utc(2027, 11, 4, 16, 0)},
		{"berlin autumn cut-off in CEST, deadline in CET", berlin, utc(2027, 10, 29, 14, 59), "1 working day at 09:30", utc(2027, 11, 1, 8, 30)},
		// New York springs forward on Sunday 2027-03-14: 17:00 EST is 22:00Z, 17:00 EDT 21:00Z.
		{"new york spring from Wednesday", newYork, utc(2027, 3, 10, 17, 0), "5 working days", utc(2027, 3, 17, 21, 0)},
		{"new york spring from Friday after cut-off", newYork, utc(2027, 3, 12, 22, 0), "1 working day", utc(2027, 3, 16, 21, 0)},
		{"new york spring before cut-off in EST", newYork, utc(2027, 3, 12, 21, 59), "1 working day", utc(2027, 3, 15, 21, 0)},
		// New York falls back on Sunday 2027-11-07.
		{"new york autumn from Wednesday", newYork, utc(2027, 11, 3, 16, 0), "5 working days", utc(2027, 11, 10, 22, 0)},
		{"new york autumn Veterans Day skipped", newYorkHolidays, utc(2027, 11, 4, 16, 0), "5 working days", utc(2027, 11, 12, 22, 0)},
		{"new york July 5 skipped", newYorkHolidays, utc(2027, 6, 30, 14, 0), "5 working days", utc(2027, 7, 8, 21, 0)},
		{"new york July 5 skipped, morning deadline", newYorkHolidays, utc(2027, 7, 2, 14, 0), "1 working day at 09:00", utc(2027, 7, 6, 13, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.cal.Resolve(tt.from, tt.spec)
			require.NoError(t, err)
			require.True(t, tt.want.Equal(got), "want %v, got %v (%v)", tt.want, got.UTC(), got)
			require.Equal(t, tt.cal.Location(), got.Location())
		})
	}
}

// A deadline time the clocks skip or repeat on the deadline's date is
// refused, never moved to a neighbouring instant.
func TestBusinessDaysRefusesGapAndOverlap(t *testing.T) {
	t.Parallel()

	// Saturday is the only weekend day, so the transition Sundays are working days.
	berlin := newCalendar(t, calendar.BusinessDaysConfig{Zone: "Europe/Berlin", Weekend: []time.Weekday{time.Saturday}})
	newYork := newCalendar(t, calendar.BusinessDaysConfig{Zone: "America/New_York", Weekend: []time.Weekday{time.Saturday}})

	tests := []struct {
		name  string
		cal   *calendar.BusinessDays
		from  time.Time
		spec  string
		parts []string
	}{
		{"berlin gap", berlin, utc(2027, 3, 26, 9, 0), "1 working day at 02:30", []string{"nonexistent local time 02:30 on 2027-03-28 in Europe/Berlin"}},
		{"berlin gap start", berlin, utc(2027, 3, 26, 9, 0), "1 working day at 02:00", []string{"nonexistent", "02:00"}},
		{"berlin overlap", berlin, utc(2027, 10, 29, 9, 0), "1 working day at 02:30", []string{"ambiguous local time 02:30 on 2027-10-31 in Europe/Berlin", "+02:00 and +01:00"}},
		{"berlin overlap start", berlin, utc(2027, 10, 29, 9, 0), "1 working day at 02:00", []string{"ambiguous", "02:00"}},
		{"new york gap", newYork, utc(2027, 3, 12, 14, 0), "1 working day at 02:30", []string{"nonexistent local time 02:30 on 2027-03-14 in America/New_York"}},
		{"new york overlap", newYork, utc(2027, 11, 5, 14, 0), "1 working day at 01:30", []string{"ambiguous local time 01:30 on 2027-11-07 in America/New_York", "-04:00 and -05:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.cal.Resolve(tt.from, tt.spec)
			requireRefused(t, err, tt.parts...)
		})
	}

	// The edges of the gap and the overlap are single instants and resolve.
	edges := []struct {
		cal  *calendar.BusinessDays
		from time.Time
		spec string
		want time.Time
	}{
		{berlin, utc(2027, 3, 26, 9, 0), "1 working day at 01:59", utc(2027, 3, 28, 0, 59)},
		{berlin, utc(2027, 3, 26, 9, 0), "1 working day at 03:00", utc(2027, 3, 28, 1, 0)},
		{berlin, utc(2027, 10, 29, 9, 0), "1 working day at 01:59", utc(2027, 10, 30, 23, 59)},
		{berlin, utc(2027, 10, 29, 9, 0), "1 working day at 03:00", utc(2027, 10, 31, 2, 0)},
		{newYork, utc(2027, 11, 5, 14, 0), "1 working day at 02:00", utc(2027, 11, 7, 7, 0)},
	}
	for _, e := range edges {
		got, err := e.cal.Resolve(e.from, e.spec)
		require.NoError(t, err, e.spec)
		require.True(t, e.want.Equal(got), "%s: want %v, got %v", e.spec, e.want, got.UTC())
	}
}

// A cut-off the clocks repeat makes a from between its two occurrences
// ambiguous; before the first and from the second on, the answer is clear.
// A cut-off the clocks skip has passed once they have jumped.
func TestBusinessDaysCutoffAtTransition(t *testing.T) {
	t.Parallel()
	cal := newCalendar(t, calendar.BusinessDaysConfig{
		Zone:    "Europe/Berlin",
		Weekend: []time.Weekday{time.Saturday},
		Cutoff:  "02:30",
	})
	// 2027-10-31 02:30 occurs at 00:30Z (CEST) and again at 01:30Z (CET).
	tests := []struct {
		name string
		from time.Time
		want time.Time // zero: refused
	}{
		{"before the first 02:30", utc(2027, 10, 31, 0, 15), utc(2027, 11, 1, 11, 0)},
		{"at the first 02:30", utc(2027, 10, 31, 0, 30), time.Time{}},
		{"between the two", utc(2027, 10, 31, 1, 15), time.Time{}},
		{"at the second 02:30", utc(2027, 10, 31, 1, 30), utc(2027, 11, 2, 11, 0)},
		// 2027-03-28 02:30 does not exist; the clocks jump at 01:00Z.
		{"before the skipped cut-off", utc(2027, 3, 28, 0, 59), utc(2027, 3, 29, 10, 0)},
		{"after the skipped cut-off", utc(2027, 3, 28, 1, 0), utc(2027, 3, 30, 10, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := cal.Resolve(tt.from, "1 working day at 12:00")
			if tt.want.IsZero() {
				requireRefused(t, err, "ambiguous", "cut-off 02:30 on 2027-10-31")
				return
			}
			require.NoError(t, err)
			require.True(t, tt.want.Equal(got), "want %v, got %v", tt.want, got.UTC())
		})
	}
}

func TestNewBusinessDaysRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  calendar.BusinessDaysConfig
		part string
	}{
		{"empty zone", calendar.BusinessDaysConfig{}, "zone is empty"},
		{"unknown zone", calendar.BusinessDaysConfig{Zone: "Europe/Atlantis"}, `unknown time zone "Europe/Atlantis"`},
		{"Local", calendar.BusinessDaysConfig{Zone: "Local"}, "machine-specific"},
		{"path zone", calendar.BusinessDaysConfig{Zone: "../etc/passwd"}, "not an IANA"},
		{"absolute zone", calendar.BusinessDaysConfig{Zone: "/Europe/Berlin"}, "not an IANA"},
		{"seven weekend days", calendar.BusinessDaysConfig{Zone: "UTC", Weekend: []time.Weekday{0, 1, 2, 3, 4, 5, 6}}, "all seven"},
		{"seven weekend days with duplicates", calendar.BusinessDaysConfig{Zone: "UTC", Weekend: []time.Weekday{6, 0, 1, 2, 3, 4, 5, 6, 0}}, "all seven"},
		{"weekday out of range", calendar.BusinessDaysConfig{Zone: "UTC", Weekend: []time.Weekday{7}}, "weekend day 7"},
		{"negative weekday", calendar.BusinessDaysConfig{Zone: "UTC", Weekend: []time.Weekday{-1}}, "weekend day -1"},
		{"impossible holiday", calendar.BusinessDaysConfig{Zone: "UTC", Holidays: []string{"2027-02-30"}}, `holiday "2027-02-30"`},
		{"unpadded holiday", calendar.BusinessDaysConfig{Zone: "UTC", Holidays: []string{"2027-4-2"}}, `holiday "2027-4-2"`},
		{"holiday with time", calendar.BusinessDaysConfig{Zone: "UTC", Holidays: []string{"2027-04-02T00:00"}}, "not a YYYY-MM-DD"},
		{"holiday out of range", calendar.BusinessDaysConfig{Zone: "UTC", Holidays: []string{"1969-12-25"}}, "outside the known range"},
		{"holiday after known range", calendar.BusinessDaysConfig{Zone: "UTC", KnownThrough: "2027-12-31", Holidays: []string{"2028-01-01"}}, "outside the known range"},
		{"known range reversed", calendar.BusinessDaysConfig{Zone: "UTC", KnownFrom: "2028-01-01", KnownThrough: "2027-12-31"}, "is empty"},
		{"known range too wide", calendar.BusinessDaysConfig{Zone: "UTC", KnownThrough: "2300-01-01"}, "reaches outside"},
		{"malformed known-from", calendar.BusinessDaysConfig{Zone: "UTC", KnownFrom: "2027"}, "known-from"},
		{"too many holidays", calendar.BusinessDaysConfig{Zone: "UTC", Holidays: make([]string, calendar.MaxHolidays+1)}, "more than"},
		{"cut-off 24:00", calendar.BusinessDaysConfig{Zone: "UTC", Cutoff: "24:00"}, `cut-off "24:00"`},
		{"cut-off 17:60", calendar.BusinessDaysConfig{Zone: "UTC", Cutoff: "17:60"}, "cut-off"},
		{"cut-off unpadded", calendar.BusinessDaysConfig{Zone: "UTC", Cutoff: "9:00"}, "cut-off"},
		{"cut-off with seconds", calendar.BusinessDaysConfig{Zone: "UTC", Cutoff: "17:00:00"}, "cut-off"},
		{"cut-off 5pm", calendar.BusinessDaysConfig{Zone: "UTC", Cutoff: "5pm"}, "cut-off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cal, err := calendar.NewBusinessDays(tt.cfg)
			require.Nil(t, cal)
			requireRefused(t, err, tt.part)
		})
	}
}

func TestBusinessDaysRefusesSpecs(t *testing.T) {
	t.Parallel()
	cal := newCalendar(t, calendar.BusinessDaysConfig{Zone: "Europe/Berlin", KnownThrough: "2028-12-31"})
	from := utc(2027, 3, 24, 9, 0)
	tests := []struct {
		spec string
		part string
	}{
		{"", "empty spec"},
		{"5 days", "counts calendar days"},
		{"5 calendar days", "counts calendar days"},
		{"five working days", `count "five" is not a decimal number`},
		{"0 working days", "count 0 is outside 1 … 1000"},
		{"-1 working days", "not a decimal number"},
		{"+5 working days", "not a decimal number"},
		{"05 working days", "leading zero"},
		{"1001 working days", "outside 1 … 1000"},
		{"99999999999999999999 working days", "outside 1 … 1000"},
		{"5 working days at 25:00", `deadline time "25:00"`},
		{"5 working days at 17:60", "deadline time"},
		{"5 working days at 5pm", "deadline time"},
		{"5 working days at 17:00:00", "deadline time"},
		{"5 working days at", "not a working-day spec"},
		{"5 working days by 17:00", "not a working-day spec"},
		{"5 working day", `write "5 working days"`},
		{"1 working days at 09:00", `write "1 working day at 09:00"`},
		{"5 Working Days", "not a working-day spec"},
		{"5  working days", "not a working-day spec"},
		{" 5 working days", "not a working-day spec"},
		{"5 working days ", "not a working-day spec"},
		{"5 working days\n", "not a working-day spec"},
		{"5 workdays", "not a working-day spec"},
		{"48h", "not a working-day spec"},
		{"PT48H", "not a working-day spec"},
		{"5 working days at 17:00 Europe/Berlin", "not a working-day spec"},
		{strings.Repeat("5", 70) + " working days", "longer than 64"},
		// 1000 working days run past the known range.
		{"1000 working days", "past the calendar's known range"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			got, err := cal.Resolve(from, tt.spec)
			require.True(t, got.IsZero())
			requireRefused(t, err, tt.part)
		})
	}
}

func TestBusinessDaysBounds(t *testing.T) {
	t.Parallel()
	cal := newCalendar(t, calendar.BusinessDaysConfig{Zone: "Europe/Berlin", KnownFrom: "2027-01-01", KnownThrough: "2027-12-31"})

	// The largest count resolves in a calendar that knows enough years.
	wide := newCalendar(t, calendar.BusinessDaysConfig{Zone: "Europe/Berlin"})
	got, err := wide.Resolve(utc(2027, 1, 4, 8, 0), "1000 working days")
	require.NoError(t, err)
	require.True(t, utc(2030, 11, 4, 16, 0).Equal(got), got.UTC()) // 200 weeks (1400 days) on, a Monday, in CET

	// A from outside the known range, the zero time, and a count that
	// leaves the range are refused.
	_, err = cal.Resolve(utc(2026, 12, 31, 12, 0), "1 working day")
	requireRefused(t, err, "2026-12-31 is outside the calendar's known range 2027-01-01 … 2027-12-31")
	_, err = cal.Resolve(time.Time{}, "1 working day")
	requireRefused(t, err, "outside the calendar's known range")
	_, err = cal.Resolve(utc(2027, 12, 30, 12, 0), "2 working days")
	requireRefused(t, err, "past the calendar's known range (through 2027-12-31)")
	got, err = cal.Resolve(utc(2027, 12, 30, 12, 0), "1 working day")
	require.NoError(t, err)
	require.True(t, utc(2027, 12, 31, 16, 0).Equal(got))

	// The local date decides the range: 23:30Z on 2026-12-31 is already 2027 in Berlin.
	_, err = cal.Resolve(utc(2026, 12, 31, 23, 30), "1 working day")
	require.NoError(t, err)

	// A calendar whose only working day is almost always a holiday runs out
	// of days to scan rather than searching forever.
	var holidays []string
	for d := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2199; d = d.AddDate(0, 0, 7) {
		if len(holidays) == calendar.MaxHolidays {
			break
		}
		for d.Weekday() != time.Wednesday {
			d = d.AddDate(0, 0, 1)
		}
		holidays = append(holidays, d.Format(time.DateOnly))
	}
	sparse := newCalendar(t, calendar.BusinessDaysConfig{
		Zone:     "UTC",
		Weekend:  []time.Weekday{0, 1, 2, 4, 5, 6},
		Holidays: holidays,
	})
	_, err = sparse.Resolve(utc(2027, 1, 1, 12, 0), "1 working day")
	requireRefused(t, err, "10000 days")
}

// The digest covers every rule and nothing else: order and duplicates in the
// configuration do not change it, any rule does.
func TestBusinessDaysDigest(t *testing.T) {
	t.Parallel()
	base := calendar.BusinessDaysConfig{
		Zone:     "Europe/Berlin",
		Weekend:  []time.Weekday{time.Saturday, time.Sunday},
		Holidays: []string{"2027-03-26", "2027-03-29"},
		Cutoff:   "17:00",
	}
	digest := newCalendar(t, base).Digest()
	require.Regexp(t, regexp.MustCompile(`^sha256:[0-9a-f]{64}$`), digest)

	same := []calendar.BusinessDaysConfig{
		{Zone: "Europe/Berlin", Holidays: []string{"2027-03-29", "2027-03-26", "2027-03-29"}},               // defaults, reordered, duplicated
		{Zone: "Europe/Berlin", Weekend: []time.Weekday{0, 6, 0}, Holidays: base.Holidays, Cutoff: "17:00"}, // weekend reordered
		{Zone: "Europe/Berlin", Weekend: base.Weekend, Holidays: base.Holidays, KnownFrom: "1970-01-01", KnownThrough: "2199-12-31"},
		newCalendar(t, base).Config(),
	}
	for i, cfg := range same {
		require.Equal(t, digest, newCalendar(t, cfg).Digest(), "config %d", i)
	}

	changed := map[string]calendar.BusinessDaysConfig{
		"zone":          {Zone: "Europe/Vienna", Holidays: base.Holidays},
		"weekend":       {Zone: "Europe/Berlin", Weekend: []time.Weekday{time.Friday, time.Saturday}, Holidays: base.Holidays},
		"no weekend":    {Zone: "Europe/Berlin", Weekend: []time.Weekday{}, Holidays: base.Holidays},
		"holiday added": {Zone: "Europe/Berlin", Holidays: append([]string{"2027-12-24"}, base.Holidays...)},
		"holiday gone":  {Zone: "Europe/Berlin", Holidays: base.Holidays[:1]},
		"no holidays":   {Zone: "Europe/Berlin"},
		"cut-off":       {Zone: "Europe/Berlin", Holidays: base.Holidays, Cutoff: "16:00"},
		"known from":    {Zone: "Europe/Berlin", Holidays: base.Holidays, KnownFrom: "2027-01-01"},
		"known through": {Zone: "Europe/Berlin", Holidays: base.Holidays, KnownThrough: "2027-12-31"},
	}
	seen := map[string]string{digest: "base"}
	for name, cfg := range changed {
		d := newCalendar(t, cfg).Digest()
		prev, dup := seen[d]
		require.False(t, dup, "%s has the digest of %s", name, prev)
		seen[d] = name
	}

	// The digest is a function of the rules alone: a known encoding pins it,
	// so a silent change of the encoding fails here.
	canonical := "docket.calendar.business-days/v1\n" +
		"zone Europe/Berlin\n" +
		"weekend 0 6\n" +
		"holidays 2027-03-26 2027-03-29\n" +
		"cutoff 17:00\n" +
		"known 1970-01-01 2199-12-31\n"
	sum := sha256.Sum256([]byte(canonical))
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), digest)
}

// Config returns the normalised rules, and a copy the caller may change.
func TestBusinessDaysConfig(t *testing.T) {
	t.Parallel()
	cal := newCalendar(t, calendar.BusinessDaysConfig{
		Zone:     "America/New_York",
		Weekend:  []time.Weekday{time.Sunday, time.Saturday, time.Sunday},
		Holidays: []string{"2027-11-11", "2027-07-05", "2027-11-11"},
	})
	cfg := cal.Config()
	require.Equal(t, calendar.BusinessDaysConfig{
		Zone:         "America/New_York",
		Weekend:      []time.Weekday{time.Sunday, time.Saturday},
		Holidays:     []string{"2027-07-05", "2027-11-11"},
		Cutoff:       "17:00",
		KnownFrom:    "1970-01-01",
		KnownThrough: "2199-12-31",
	}, cfg)
	cfg.Holidays[0] = "2027-01-01"
	require.Equal(t, "2027-07-05", cal.Config().Holidays[0])
}

// One calendar serves many goroutines; each gets the same answer.
func TestBusinessDaysConcurrent(t *testing.T) {
	t.Parallel()
	cal := newCalendar(t, calendar.BusinessDaysConfig{Zone: "Europe/Berlin", Holidays: []string{"2027-03-26", "2027-03-29"}})
	want := utc(2027, 4, 2, 15, 0)
	start := make(chan struct{})
	errs := make(chan error, 32)
	for range 32 {
		go func() {
			<-start
			for range 100 {
				got, err := cal.Resolve(utc(2027, 3, 24, 9, 0), "5 working days")
				if err == nil && !got.Equal(want) {
					err = errors.New("got " + got.String())
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	close(start)
	for range 32 {
		require.NoError(t, <-errs)
	}
}

// Samoa moved across the date line at the end of 2011: its clocks never read
// Friday 2011-12-30, so that Friday is no working day.
func TestBusinessDaysSkippedDate(t *testing.T) {
	t.Parallel()
	cal := newCalendar(t, calendar.BusinessDaysConfig{Zone: "Pacific/Apia"})
	apia := cal.Location()

	got, err := cal.Resolve(time.Date(2011, 12, 29, 10, 0, 0, 0, apia), "1 working day")
	require.NoError(t, err)
	require.Equal(t, "2012-01-02 17:00:00 +1400", got.Format("2006-01-02 15:04:05 -0700"))

	got, err = cal.Resolve(time.Date(2011, 12, 29, 18, 0, 0, 0, apia), "1 working day")
	require.NoError(t, err)
	require.Equal(t, "2012-01-03 17:00:00 +1400", got.Format("2006-01-02 15:04:05 -0700"))
}
