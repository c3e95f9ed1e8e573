package schedules_test

import (
	"archive/zip"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/schedules"
)

// randomExpr draws a five-field expression: each field *, */n, a value, a
// range, a list or a stepped range.
func randomExpr(r *rand.Rand) string {
	field := func(lo, hi int) string {
		v := func() int { return lo + r.IntN(hi-lo+1) }
		switch r.IntN(6) {
		case 0:
			return "*"
		case 1:
			return fmt.Sprintf("*/%d", 1+r.IntN(max(1, (hi-lo)/2)))
		case 2:
			return fmt.Sprint(v())
		case 3:
			a, b := v(), v()
			return fmt.Sprintf("%d-%d", min(a, b), max(a, b))
		case 4:
			return fmt.Sprintf("%d,%d,%d", v(), v(), v())
		default:
			a := v()
			return fmt.Sprintf("%d-%d/%d", a, hi, 1+r.IntN(3))
		}
	}
	return strings.Join([]string{field(0, 59), field(0, 23), field(1, 31), field(1, 12), field(0, 6)}, " ")
}

// TestNextMatchesRobfigOnUTC: in UTC, where no local time is missing or
// repeated, Next gives exactly robfig/cron's Next, for random expressions
// and cursors, every fold 0.
func TestNextMatchesRobfigOnUTC(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(8, 2026))
	compared := 0
	for range 3000 {
		expr := randomExpr(r)
		ours, err := schedules.ParseCron(expr)
		require.NoError(t, err, expr)
		theirs, err := cron.ParseStandard("CRON_TZ=UTC " + expr)
		require.NoError(t, err, expr)
		after := time.Unix(r.Int64N(4102444800), r.Int64N(1e9)).UTC() // 1970 .. 2100
		for range 5 {
			want := theirs.Next(after)
			got, err := schedules.Next(ours, time.UTC, after)
			if want.IsZero() { // robfig looks five years ahead, docket ten
				require.True(t, err != nil || got.At.Sub(after) > 5*365*24*time.Hour, "%s after %s", expr, after)
				break
			}
			require.NoError(t, err, "%s after %s", expr, after)
			require.Equal(t, want.UTC(), got.At, "%s after %s", expr, after)
			require.Equal(t, want.UTC(), got.Local)
			require.Zero(t, got.Fold)
			compared++
			after = got.At
		}
	}
	t.Logf("%d occurrences identical to robfig/cron's", compared)
}

// FuzzNextUTC is TestNextMatchesRobfigOnUTC for the fuzzer: any expression
// both parse, any cursor.
func FuzzNextUTC(f *testing.F) {
	f.Add("30 2 * * *", int64(1774713600))
	f.Add("*/15 * * * 1-5", int64(0))
	f.Add("0 0 29 2 *", int64(1700000000))
	f.Fuzz(func(t *testing.T, expr string, unix int64) {
		if unix < 0 || unix > 4102444800 {
			return
		}
		ours, err := schedules.ParseCron(expr)
		if err != nil {
			return
		}
		theirs, err := cron.ParseStandard("CRON_TZ=UTC " + strings.TrimSpace(expr))
		if err != nil {
			t.Fatalf("docket parses %q, robfig/cron does not: %v", expr, err)
		}
		after := time.Unix(unix, 0).UTC()
		want := theirs.Next(after)
		got, err := schedules.Next(ours, time.UTC, after)
		if want.IsZero() {
			return
		}
		require.NoError(t, err)
		require.Equal(t, want.UTC(), got.At)
	})
}

// zoneNames lists every zone of Go's time zone database.
func zoneNames(t *testing.T) []string {
	t.Helper()
	var names []string
	goroot, _ := exec.Command("go", "env", "GOROOT").Output()
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "time", "zoneinfo.zip"))
	if err == nil {
		defer zr.Close()
		for _, f := range zr.File {
			if !strings.HasSuffix(f.Name, "/") {
				names = append(names, f.Name)
			}
		}
	} else {
		root := "/usr/share/zoneinfo"
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.Contains(p, "posix") && !strings.Contains(p, "right") {
				if rel, _ := filepath.Rel(root, p); !strings.Contains(rel, ".") {
					names = append(names, rel)
				}
			}
			return nil
		})
	}
	if len(names) == 0 {
		t.Skip("no time zone database: set GOROOT or install tzdata")
	}
	slices.Sort(names)
	return names
}

// TestNextAdvancesInEveryZone: in every zone of the tz database, from
// cursors around each transition from 1900 to 2040 and from random
// instants, Next always advances, a run lands on its local time (or, moved
// out of a gap, on a transition whose missing range holds it), fold 1 means
// the local time was seen before, and a fixed-time schedule never runs a
// fold 1.
func TestNextAdvancesInEveryZone(t *testing.T) {
	t.Parallel()
	exprs := []string{"30 2 * * *", "0 * * * *", "*/15 * * * *", "0 0 * * *", "0,30 1-3 * * *"}
	crons := make([]schedules.Cron, len(exprs))
	for i, e := range exprs {
		c, err := schedules.ParseCron(e)
		require.NoError(t, err)
		crons[i] = c
	}
	names := zoneNames(t)
	const groups = 8
	for g := range groups {
		t.Run(fmt.Sprintf("zones-%d-of-%d", g+1, groups), func(t *testing.T) {
			t.Parallel()
			var mine []string
			for i := g; i < len(names); i += groups {
				mine = append(mine, names[i])
			}
			calls := checkZones(t, mine, crons)
			t.Logf("%d zones, %d calls of Next", len(mine), calls)
		})
	}
}

// checkZones runs the checks of TestNextAdvancesInEveryZone over names and
// returns how many times it called Next.
func checkZones(t *testing.T, names []string, crons []schedules.Cron) int {
	from, to := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	calls := 0
	for _, name := range names {
		loc, err := time.LoadLocation(name)
		if err != nil {
			continue
		}
		r := rand.New(rand.NewPCG(uint64(len(name)), 7))
		var cursors []time.Time
		for at := from; at.Before(to); {
			_, end := at.In(loc).ZoneBounds()
			if end.IsZero() || !end.Before(to) {
				break
			}
			for _, d := range []time.Duration{-time.Second, 20 * time.Minute} {
				cursors = append(cursors, end.Add(d))
			}
			at = end
		}
		for range 20 {
			cursors = append(cursors, from.Add(time.Duration(r.Int64N(int64(to.Sub(from))))))
		}
		for _, cur := range cursors {
			for _, c := range crons {
				after := cur
				for range 2 {
					o, err := schedules.Next(c, loc, after)
					calls++
					require.NoError(t, err, "%s %s after %s", name, c, after)
					require.True(t, o.At.After(after), "%s %s: %s does not advance past %s", name, c, o, after)
					checkOccurrence(t, loc, c, o)
					after = o.At
				}
			}
		}
	}
	return calls
}

// checkOccurrence checks o against the zone itself.
func checkOccurrence(t *testing.T, loc *time.Location, c schedules.Cron, o schedules.Occurrence) {
	t.Helper()
	lt := o.At.In(loc)
	wallAt := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), 0, time.UTC)
	if !wallAt.Equal(o.Local) {
		// Moved out of a gap: o.At starts an offset whose missing range
		// [wall before, wall after) holds o.Local; fixed-time only.
		require.True(t, c.FixedTime(), "%s %s: local %s at %s", loc, c, o.Local, lt)
		_, off := lt.Zone()
		_, prev := o.At.Add(-time.Nanosecond).In(loc).Zone()
		lo := o.At.Add(time.Duration(prev) * time.Second)
		hi := o.At.Add(time.Duration(off) * time.Second)
		require.True(t, !o.Local.Before(lo.UTC()) && o.Local.Before(hi.UTC()), "%s %s: %s is not in the gap", loc, c, o)
		require.Zero(t, o.Fold)
		return
	}
	// Seen before: an instant of an earlier offset segment (up to three
	// back) shows the same wall clock.
	seen := false
	at := o.At
	for range 3 {
		start, _ := at.In(loc).ZoneBounds()
		if start.IsZero() {
			break
		}
		at = start.Add(-time.Nanosecond)
		prevStart, _ := at.In(loc).ZoneBounds()
		_, off := at.In(loc).Zone()
		e := o.Local.Add(-time.Duration(off) * time.Second)
		if e.Before(o.At) && !e.Before(prevStart) && e.Before(start) {
			seen = true
		}
	}
	require.Equal(t, seen, o.Fold == 1, "%s %s: %s, seen before: %v", loc, c, o, seen)
	if o.Fold == 1 {
		require.False(t, c.FixedTime(), "%s %s: a fixed time ran twice: %s", loc, c, o)
	}
}
