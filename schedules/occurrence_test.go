package schedules_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/schedules"
)

// occ is one expected occurrence: local date-time, fold, UTC instant.
type occ struct {
	local string // 2006-01-02 15:04 in the zone
	fold  int
	at    string // RFC 3339, UTC
}

// dstCases are the four expressions across both 2026 transitions of four
// zones, plus fixed times with several slots in one gap and in an overlap.
// Each lists, from a cursor, the next occurrences the policy gives. The
// instants follow from the zones' 2026 rules (zdump -v -c 2026,2027):
//
//	Europe/Berlin        Mar 29 01:00Z +1 -> +2 (02:00-03:00 missing); Oct 25 01:00Z +2 -> +1 (02:00-03:00 twice)
//	America/New_York     Mar  8 07:00Z -5 -> -4 (02:00-03:00 missing); Nov  1 06:00Z -4 -> -5 (01:00-02:00 twice)
//	America/Havana       Mar  8 05:00Z -5 -> -4 (00:00-01:00 missing); Nov  1 05:00Z -4 -> -5 (00:00-01:00 twice)
//	Australia/Lord_Howe  Apr  4 15:00Z +11 -> +10:30 (01:30-02:00 twice); Oct 3 15:30Z +10:30 -> +11 (02:00-02:30 missing)
//
// They were cross-checked against a brute-force walk over every UTC minute
// with Python's zoneinfo (each minute's wall clock and fold, the policy
// applied to that sequence).
var dstCases = []struct {
	zone, expr, cursor string
	want               []occ
}{
	// Berlin, spring forward.
	{"Europe/Berlin", "30 2 * * *", "2026-03-28T12:00:00Z", []occ{
		{"2026-03-29 02:30", 0, "2026-03-29T01:00:00Z"}, // nonexistent: first instant after the gap
		{"2026-03-30 02:30", 0, "2026-03-30T00:30:00Z"}}},
	{"Europe/Berlin", "0 * * * *", "2026-03-28T23:30:00Z", []occ{
		{"2026-03-29 01:00", 0, "2026-03-29T00:00:00Z"},
		{"2026-03-29 03:00", 0, "2026-03-29T01:00:00Z"}, // no 02:00: interval-like
		{"2026-03-29 04:00", 0, "2026-03-29T02:00:00Z"}}},
	{"Europe/Berlin", "*/15 * * * *", "2026-03-29T00:30:00Z", []occ{
		{"2026-03-29 01:45", 0, "2026-03-29T00:45:00Z"},
		{"2026-03-29 03:00", 0, "2026-03-29T01:00:00Z"},
		{"2026-03-29 03:15", 0, "2026-03-29T01:15:00Z"}}},
	{"Europe/Berlin", "0 0 * * *", "2026-03-28T12:00:00Z", []occ{
		{"2026-03-29 00:00", 0, "2026-03-28T23:00:00Z"},
		{"2026-03-30 00:00", 0, "2026-03-29T22:00:00Z"}}},
	{"Europe/Berlin", "0,30 2 * * *", "2026-03-28T12:00:00Z", []occ{
		{"2026-03-29 02:00", 0, "2026-03-29T01:00:00Z"}, // two slots in one gap: one run
		{"2026-03-30 02:00", 0, "2026-03-30T00:00:00Z"}}},
	// Berlin, fall back.
	{"Europe/Berlin", "30 2 * * *", "2026-10-24T12:00:00Z", []occ{
		{"2026-10-25 02:30", 0, "2026-10-25T00:30:00Z"}, // the first 02:30 only
		{"2026-10-26 02:30", 0, "2026-10-26T01:30:00Z"}}},
	{"Europe/Berlin", "0 * * * *", "2026-10-24T23:30:00Z", []occ{
		{"2026-10-25 02:00", 0, "2026-10-25T00:00:00Z"},
		{"2026-10-25 02:00", 1, "2026-10-25T01:00:00Z"}, // both: every 60 real minutes
		{"2026-10-25 03:00", 0, "2026-10-25T02:00:00Z"}}},
	{"Europe/Berlin", "*/15 * * * *", "2026-10-25T00:30:00Z", []occ{
		{"2026-10-25 02:45", 0, "2026-10-25T00:45:00Z"},
		{"2026-10-25 02:00", 1, "2026-10-25T01:00:00Z"},
		{"2026-10-25 02:15", 1, "2026-10-25T01:15:00Z"},
		{"2026-10-25 02:30", 1, "2026-10-25T01:30:00Z"},
		{"2026-10-25 02:45", 1, "2026-10-25T01:45:00Z"},
		{"2026-10-25 03:00", 0, "2026-10-25T02:00:00Z"}}},
	{"Europe/Berlin", "0 0 * * *", "2026-10-24T12:00:00Z", []occ{
		{"2026-10-25 00:00", 0, "2026-10-24T22:00:00Z"},
		{"2026-10-26 00:00", 0, "2026-10-25T23:00:00Z"}}},
	// New York, spring forward.
	{"America/New_York", "30 2 * * *", "2026-03-07T12:00:00Z", []occ{
		{"2026-03-08 02:30", 0, "2026-03-08T07:00:00Z"},
		{"2026-03-09 02:30", 0, "2026-03-09T06:30:00Z"}}},
	{"America/New_York", "0 * * * *", "2026-03-08T05:30:00Z", []occ{
		{"2026-03-08 01:00", 0, "2026-03-08T06:00:00Z"},
		{"2026-03-08 03:00", 0, "2026-03-08T07:00:00Z"},
		{"2026-03-08 04:00", 0, "2026-03-08T08:00:00Z"}}},
	{"America/New_York", "*/15 * * * *", "2026-03-08T06:30:00Z", []occ{
		{"2026-03-08 01:45", 0, "2026-03-08T06:45:00Z"},
		{"2026-03-08 03:00", 0, "2026-03-08T07:00:00Z"},
		{"2026-03-08 03:15", 0, "2026-03-08T07:15:00Z"}}},
	{"America/New_York", "0 0 * * *", "2026-03-07T12:00:00Z", []occ{
		{"2026-03-08 00:00", 0, "2026-03-08T05:00:00Z"},
		{"2026-03-09 00:00", 0, "2026-03-09T04:00:00Z"}}},
	// New York, fall back.
	{"America/New_York", "30 2 * * *", "2026-10-31T12:00:00Z", []occ{
		{"2026-11-01 02:30", 0, "2026-11-01T07:30:00Z"},
		{"2026-11-02 02:30", 0, "2026-11-02T07:30:00Z"}}},
	{"America/New_York", "30 1 * * *", "2026-10-31T12:00:00Z", []occ{
		{"2026-11-01 01:30", 0, "2026-11-01T05:30:00Z"},
		{"2026-11-02 01:30", 0, "2026-11-02T06:30:00Z"}}},
	{"America/New_York", "0 * * * *", "2026-11-01T04:30:00Z", []occ{
		{"2026-11-01 01:00", 0, "2026-11-01T05:00:00Z"},
		{"2026-11-01 01:00", 1, "2026-11-01T06:00:00Z"},
		{"2026-11-01 02:00", 0, "2026-11-01T07:00:00Z"}}},
	{"America/New_York", "*/15 * * * *", "2026-11-01T05:30:00Z", []occ{
		{"2026-11-01 01:45", 0, "2026-11-01T05:45:00Z"},
		{"2026-11-01 01:00", 1, "2026-11-01T06:00:00Z"},
		{"2026-11-01 01:15", 1, "2026-11-01T06:15:00Z"},
		{"2026-11-01 01:30", 1, "2026-11-01T06:30:00Z"},
		{"2026-11-01 01:45", 1, "2026-11-01T06:45:00Z"},
		{"2026-11-01 02:00", 0, "2026-11-01T07:00:00Z"}}},
	{"America/New_York", "0 0 * * *", "2026-10-31T12:00:00Z", []occ{
		{"2026-11-01 00:00", 0, "2026-11-01T04:00:00Z"},
		{"2026-11-02 00:00", 0, "2026-11-02T05:00:00Z"}}},
	// Havana: the gap and the overlap are at midnight.
	{"America/Havana", "30 2 * * *", "2026-03-07T12:00:00Z", []occ{
		{"2026-03-08 02:30", 0, "2026-03-08T06:30:00Z"},
		{"2026-03-09 02:30", 0, "2026-03-09T06:30:00Z"}}},
	{"America/Havana", "0 * * * *", "2026-03-08T03:30:00Z", []occ{
		{"2026-03-07 23:00", 0, "2026-03-08T04:00:00Z"},
		{"2026-03-08 01:00", 0, "2026-03-08T05:00:00Z"},
		{"2026-03-08 02:00", 0, "2026-03-08T06:00:00Z"}}},
	{"America/Havana", "*/15 * * * *", "2026-03-08T04:30:00Z", []occ{
		{"2026-03-07 23:45", 0, "2026-03-08T04:45:00Z"},
		{"2026-03-08 01:00", 0, "2026-03-08T05:00:00Z"},
		{"2026-03-08 01:15", 0, "2026-03-08T05:15:00Z"}}},
	{"America/Havana", "0 0 * * *", "2026-03-07T12:00:00Z", []occ{
		{"2026-03-08 00:00", 0, "2026-03-08T05:00:00Z"}, // midnight does not exist that day
		{"2026-03-09 00:00", 0, "2026-03-09T04:00:00Z"}}},
	{"America/Havana", "30 2 * * *", "2026-10-31T12:00:00Z", []occ{
		{"2026-11-01 02:30", 0, "2026-11-01T07:30:00Z"},
		{"2026-11-02 02:30", 0, "2026-11-02T07:30:00Z"}}},
	{"America/Havana", "0 * * * *", "2026-11-01T03:30:00Z", []occ{
		{"2026-11-01 00:00", 0, "2026-11-01T04:00:00Z"},
		{"2026-11-01 00:00", 1, "2026-11-01T05:00:00Z"},
		{"2026-11-01 01:00", 0, "2026-11-01T06:00:00Z"}}},
	{"America/Havana", "*/15 * * * *", "2026-11-01T04:30:00Z", []occ{
		{"2026-11-01 00:45", 0, "2026-11-01T04:45:00Z"},
		{"2026-11-01 00:00", 1, "2026-11-01T05:00:00Z"},
		{"2026-11-01 00:15", 1, "2026-11-01T05:15:00Z"},
		{"2026-11-01 00:30", 1, "2026-11-01T05:30:00Z"},
		{"2026-11-01 00:45", 1, "2026-11-01T05:45:00Z"},
		{"2026-11-01 01:00", 0, "2026-11-01T06:00:00Z"}}},
	{"America/Havana", "0 0 * * *", "2026-10-31T12:00:00Z", []occ{
		{"2026-11-01 00:00", 0, "2026-11-01T04:00:00Z"}, // midnight happens twice: once
		{"2026-11-02 00:00", 0, "2026-11-02T05:00:00Z"}}},
	// Lord Howe: the clocks move by 30 minutes.
	{"Australia/Lord_Howe", "30 2 * * *", "2026-04-04T00:00:00Z", []occ{
		{"2026-04-05 02:30", 0, "2026-04-04T16:00:00Z"},
		{"2026-04-06 02:30", 0, "2026-04-05T16:00:00Z"}}},
	{"Australia/Lord_Howe", "0 * * * *", "2026-04-04T13:30:00Z", []occ{
		{"2026-04-05 01:00", 0, "2026-04-04T14:00:00Z"},
		{"2026-04-05 02:00", 0, "2026-04-04T15:30:00Z"}, // no :00 falls in 01:30-02:00
		{"2026-04-05 03:00", 0, "2026-04-04T16:30:00Z"}}},
	{"Australia/Lord_Howe", "*/15 * * * *", "2026-04-04T14:20:00Z", []occ{
		{"2026-04-05 01:30", 0, "2026-04-04T14:30:00Z"},
		{"2026-04-05 01:45", 0, "2026-04-04T14:45:00Z"},
		{"2026-04-05 01:30", 1, "2026-04-04T15:00:00Z"},
		{"2026-04-05 01:45", 1, "2026-04-04T15:15:00Z"},
		{"2026-04-05 02:00", 0, "2026-04-04T15:30:00Z"}}},
	{"Australia/Lord_Howe", "0 0 * * *", "2026-04-04T00:00:00Z", []occ{
		{"2026-04-05 00:00", 0, "2026-04-04T13:00:00Z"},
		{"2026-04-06 00:00", 0, "2026-04-05T13:30:00Z"}}},
	{"Australia/Lord_Howe", "30 2 * * *", "2026-10-03T00:00:00Z", []occ{
		{"2026-10-04 02:30", 0, "2026-10-03T15:30:00Z"}, // the first minute after the gap exists
		{"2026-10-05 02:30", 0, "2026-10-04T15:30:00Z"}}},
	{"Australia/Lord_Howe", "0,15,30 2 * * *", "2026-10-02T12:00:00Z", []occ{
		{"2026-10-03 02:00", 0, "2026-10-02T15:30:00Z"},
		{"2026-10-03 02:15", 0, "2026-10-02T15:45:00Z"},
		{"2026-10-03 02:30", 0, "2026-10-02T16:00:00Z"},
		{"2026-10-04 02:00", 0, "2026-10-03T15:30:00Z"}, // 02:00 and 02:15 missing, 02:30 at that instant: one run
		{"2026-10-05 02:00", 0, "2026-10-04T15:00:00Z"}}},
	{"Australia/Lord_Howe", "0 * * * *", "2026-10-03T14:00:00Z", []occ{
		{"2026-10-04 01:00", 0, "2026-10-03T14:30:00Z"},
		{"2026-10-04 03:00", 0, "2026-10-03T16:00:00Z"}}},
	{"Australia/Lord_Howe", "*/15 * * * *", "2026-10-03T15:00:00Z", []occ{
		{"2026-10-04 01:45", 0, "2026-10-03T15:15:00Z"},
		{"2026-10-04 02:30", 0, "2026-10-03T15:30:00Z"},
		{"2026-10-04 02:45", 0, "2026-10-03T15:45:00Z"}}},
	{"Australia/Lord_Howe", "0 0 * * *", "2026-10-03T00:00:00Z", []occ{
		{"2026-10-04 00:00", 0, "2026-10-03T13:30:00Z"},
		{"2026-10-05 00:00", 0, "2026-10-04T13:00:00Z"}}},
}

func TestNextAcrossDST(t *testing.T) {
	t.Parallel()
	for _, tc := range dstCases {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.zone, tc.expr, tc.cursor), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, walk(t, tc.zone, tc.expr, tc.cursor, len(tc.want)))
		})
	}
}

// walk returns the n occurrences after cursor, each found from the one
// before, as a persisted cursor would be advanced.
func walk(t *testing.T, zone, expr, cursor string, n int) []occ {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	c, err := schedules.ParseCron(expr)
	require.NoError(t, err)
	after, err := time.Parse(time.RFC3339, cursor)
	require.NoError(t, err)
	var got []occ
	for range n {
		o, err := schedules.Next(c, loc, after)
		require.NoError(t, err)
		require.True(t, o.At.After(after))
		got = append(got, occ{o.Local.Format("2006-01-02 15:04"), o.Fold, o.At.Format(time.RFC3339)})
		after = o.At
	}
	return got
}

// TestNextRestartInRepeatedHour: a fixed-time schedule whose cursor lies
// anywhere in the repeated hour, after its first run there (as after a
// restart), does not run that local time again.
func TestNextRestartInRepeatedHour(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ zone, expr, cursor, next string }{
		{"Europe/Berlin", "30 2 * * *", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
		{"Europe/Berlin", "30 2 * * *", "2026-10-25T01:10:00Z", "2026-10-26T01:30:00Z"},
		{"Europe/Berlin", "30 2 * * *", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"},
		{"America/New_York", "30 1 * * *", "2026-11-01T05:45:00Z", "2026-11-02T06:30:00Z"},
		{"America/New_York", "30 1 * * *", "2026-11-01T06:05:00Z", "2026-11-02T06:30:00Z"},
		{"America/Havana", "0 0 * * *", "2026-11-01T04:30:00Z", "2026-11-02T05:00:00Z"},
		{"America/Havana", "0 0 * * *", "2026-11-01T04:59:59Z", "2026-11-02T05:00:00Z"},
		{"Australia/Lord_Howe", "45 1 * * *", "2026-04-04T14:50:00Z", "2026-04-05T15:15:00Z"},
	} {
		got := walk(t, tc.zone, tc.expr, tc.cursor, 1)
		require.Equal(t, tc.next, got[0].at, "%s %s from %s", tc.zone, tc.expr, tc.cursor)
	}
}

func TestParseCron(t *testing.T) {
	t.Parallel()
	for expr, fixed := range map[string]bool{
		"30 2 * * *": true, "0 0 * * *": true, "0,30 2 * * 1-5": true, "@daily": true, "@weekly": true,
		"0 * * * *": false, "*/15 * * * *": false, "* 2 * * *": false, "0 */2 * * *": false, "@hourly": false,
		"0 1,*/6 * * *": false,
	} {
		c, err := schedules.ParseCron(expr)
		require.NoError(t, err, expr)
		require.Equal(t, fixed, c.FixedTime(), expr)
		require.Equal(t, expr, c.String())
	}
	for _, bad := range []string{"", "61 * * * *", "* * * *", "0 0 0 * * *", "@every 5m", "TZ=UTC 0 0 * * *",
		"CRON_TZ=Europe/Berlin 0 0 * * *", "@often", "0 24 * * *"} {
		_, err := schedules.ParseCron(bad)
		require.Error(t, err, bad)
	}
	c, err := schedules.ParseCron("0 0 30 2 *")
	require.NoError(t, err)
	_, err = schedules.Next(c, time.UTC, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, schedules.ErrNoOccurrence)
}
