package calendar

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/docket-dev/docket/db"
)

// MaxDuration is the longest elapsed duration [Durations] resolves: ten
// years of 365.25 days.
const MaxDuration = 87660 * time.Hour

// maxSpecLen bounds the length of any spec a calendar in this package parses.
const maxSpecLen = 64

// durationsDigest is the fixed digest of [Durations]: its one rule is the
// grammar, versioned in the encoded name.
var durationsDigest = digestOf("docket.calendar.durations/v1\n")

// Durations resolves exact elapsed durations: Resolve returns from plus the
// duration its spec names. A spec is either
//
//   - Go-style: one or more components of a decimal number and a unit, units
//     in strictly descending order, each at most once: "48h", "1h30m",
//     "90m", "0.5h", "1500ms". Units are h, m, s, ms, us (or µs) and ns.
//   - ISO-8601 time-only: "PT" followed by components in the order H, M, S:
//     "PT48H", "PT1H30M", "PT0.5S".
//
// The duration must be greater than zero and at most [MaxDuration], and a
// fraction must come out at a whole number of nanoseconds. Days, weeks,
// months and years are refused: across a daylight-saving change a day is not
// 24 hours, so it is not an exact duration.
//
// The zero value is ready to use; all Durations values are the same calendar.
type Durations struct{}

var _ Calendar = Durations{}

// Resolve returns from plus the duration spec names, in from's location
// (without a monotonic clock reading). It refuses, with an error matching
// db.ErrInvalidArgument that says which, a zero from, a malformed spec, a
// day-or-longer unit, a non-positive duration and one beyond [MaxDuration].
func (Durations) Resolve(from time.Time, spec string) (time.Time, error) {
	const op = "calendar.durations.resolve"
	if from.IsZero() {
		return time.Time{}, db.Refuse(db.ErrInvalidArgument, op, "from is the zero time")
	}
	d, msg := parseElapsed(spec)
	if msg != "" {
		return time.Time{}, db.Refuse(db.ErrInvalidArgument, op, msg)
	}
	return from.Add(d).Round(0), nil
}

// Digest returns the fixed digest of the durations calendar.
func (Durations) Digest() string { return durationsDigest }

// elapsedUnit is one unit of an elapsed-duration spec.
type elapsedUnit struct {
	name string
	ns   int64
}

var (
	goUnits = []elapsedUnit{
		{"h", int64(time.Hour)}, {"m", int64(time.Minute)}, {"s", int64(time.Second)},
		{"ms", int64(time.Millisecond)}, {"us", int64(time.Microsecond)}, {"ns", 1},
	}
	isoUnits = []elapsedUnit{
		{"H", int64(time.Hour)}, {"M", int64(time.Minute)}, {"S", int64(time.Second)},
	}
)

// calendarUnitWords are spellings of units that are not exact durations.
var calendarUnitWords = []string{"day", "week", "month", "year", "fortnight"}

// parseElapsed parses an elapsed-duration spec. It returns the duration, or
// a refusal message saying what is wrong with spec.
func parseElapsed(spec string) (time.Duration, string) {
	const want = "want a Go duration such as 48h or 1h30m, or ISO-8601 such as PT48H"
	if spec == "" {
		return 0, "empty spec: " + want
	}
	if len(spec) > maxSpecLen {
		return 0, fmt.Sprintf("spec is %d bytes, longer than %d", len(spec), maxSpecLen)
	}
	lower := strings.ToLower(spec)
	for _, w := range calendarUnitWords {
		if strings.Contains(lower, w) {
			return 0, fmt.Sprintf("spec %q names %ss: a day, and so a week, a month or a year, is not an exact duration across a daylight-saving change (it may be 23 or 25 hours); give hours (24h) or use a business-day calendar", spec, w)
		}
	}
	var (
		body  string
		units []elapsedUnit
		iso   bool
	)
	switch {
	case strings.HasPrefix(spec, "P"):
		date, timePart, hasT := strings.Cut(spec[1:], "T")
		if date != "" {
			return 0, fmt.Sprintf("spec %q has ISO-8601 date components (Y, M, W, D): those are calendar units, not exact durations, since a day may be 23 or 25 hours across a daylight-saving change; give hours (PT48H)", spec)
		}
		if !hasT || timePart == "" {
			return 0, fmt.Sprintf("spec %q has no time components: %s", spec, want)
		}
		body, units, iso = timePart, isoUnits, true
	case strings.HasPrefix(spec, "-"):
		return 0, fmt.Sprintf("spec %q is negative: a deadline lies after from", spec)
	default:
		body, units = spec, goUnits
	}
	total := new(big.Int)
	next := 0 // index into units: components must come in descending order
	for body != "" {
		i := 0
		for i < len(body) && (body[i] >= '0' && body[i] <= '9' || body[i] == '.') {
			i++
		}
		number := body[:i]
		body = body[i:]
		j := 0
		for j < len(body) && !(body[j] >= '0' && body[j] <= '9' || body[j] == '.') {
			j++
		}
		unitName := body[:j]
		body = body[j:]
		if number == "" || unitName == "" {
			return 0, fmt.Sprintf("spec %q is not a duration: %s", spec, want)
		}
		if unitName == "d" || unitName == "D" || unitName == "w" || unitName == "W" || unitName == "y" || unitName == "Y" {
			return 0, fmt.Sprintf("spec %q uses unit %q: a day, and so a week or a year, is not an exact duration across a daylight-saving change (it may be 23 or 25 hours); give hours (24h) or use a business-day calendar", spec, unitName)
		}
		if unitName == "µs" && !iso {
			unitName = "us" // one unit, two spellings
		}
		k := next
		for k < len(units) && units[k].name != unitName {
			k++
		}
		if k == len(units) {
			for _, u := range units[:next] {
				if u.name == unitName {
					return 0, fmt.Sprintf("spec %q repeats or misorders unit %q: give each unit once, largest first", spec, unitName)
				}
			}
			return 0, fmt.Sprintf("spec %q has unknown unit %q: %s", spec, unitName, want)
		}
		next = k + 1
		if !isDecimal(number) {
			return 0, fmt.Sprintf("spec %q: %q is not a decimal number (digits, optionally a point and more digits)", spec, number)
		}
		ns, ok := exactNanoseconds(number, units[k].ns)
		if !ok {
			return 0, fmt.Sprintf("spec %q: %q%s is not a whole number of nanoseconds", spec, number, unitName)
		}
		total.Add(total, ns)
		if total.Cmp(big.NewInt(int64(MaxDuration))) > 0 {
			return 0, fmt.Sprintf("spec %q is longer than the maximum %v", spec, MaxDuration)
		}
	}
	if total.Sign() <= 0 {
		return 0, fmt.Sprintf("spec %q is not positive: a deadline lies after from", spec)
	}
	return time.Duration(total.Int64()), ""
}

// isDecimal reports whether s is digits, optionally followed by a point and
// more digits.
func isDecimal(s string) bool {
	whole, frac, point := strings.Cut(s, ".")
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return s != ""
	}
	return digits(whole) && (!point || digits(frac))
}

// exactNanoseconds returns number (as isDecimal accepts it) times unit
// nanoseconds, and whether that is a whole number. Specs are short, so the
// big integers are too.
func exactNanoseconds(number string, unit int64) (*big.Int, bool) {
	whole, frac, _ := strings.Cut(number, ".")
	n, _ := new(big.Int).SetString(whole+frac, 10)
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	n.Mul(n, big.NewInt(unit))
	q, r := new(big.Int).QuoRem(n, scale, new(big.Int))
	return q, r.Sign() == 0
}

// digestOf returns "sha256:" and the hex SHA-256 of a canonical encoding.
func digestOf(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return "sha256:" + hex.EncodeToString(sum[:])
}
