package calendar_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/cases/calendar"
)

func TestDurationsResolve(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	// Saturday before Berlin springs forward: 48 elapsed hours are 49 on the wall clock.
	from := time.Date(2027, 3, 27, 12, 0, 0, 0, berlin)
	tests := []struct {
		spec string
		want time.Duration
	}{
		{"48h", 48 * time.Hour},
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"1h30m15s", time.Hour + 30*time.Minute + 15*time.Second},
		{"0.5h", 30 * time.Minute},
		{"1.25s", 1250 * time.Millisecond},
		{"1500ms", 1500 * time.Millisecond},
		{"10us", 10 * time.Microsecond},
		{"10µs", 10 * time.Microsecond},
		{"1ns", time.Nanosecond},
		{"1s1ms1us1ns", time.Second + time.Millisecond + time.Microsecond + time.Nanosecond},
		{"87660h", calendar.MaxDuration},
		{"PT48H", 48 * time.Hour},
		{"PT1H30M", 90 * time.Minute},
		{"PT90M", 90 * time.Minute},
		{"PT0.5S", 500 * time.Millisecond},
		{"PT1H0M1S", time.Hour + time.Second},
		{"PT87660H", calendar.MaxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			got, err := calendar.Durations{}.Resolve(from, tt.spec)
			require.NoError(t, err)
			require.Equal(t, tt.want, got.Sub(from))
			require.Equal(t, berlin, got.Location())
		})
	}

	got, err := calendar.Durations{}.Resolve(from, "48h")
	require.NoError(t, err)
	require.Equal(t, "2027-03-29 13:00:00 +0200 CEST", got.String(), "elapsed, not wall-clock, hours")
}

func TestDurationsRefuses(t *testing.T) {
	t.Parallel()
	from := utc(2027, 3, 27, 12, 0)
	tests := []struct {
		spec string
		part string
	}{
		{"", "empty spec"},
		{"1d", "is not an exact duration across a daylight-saving change"},
		{"2d", "is not an exact duration across a daylight-saving change"},
		{"1w", `unit "w": a day, and so a week`},
		{"1y", `unit "y"`},
		{"2 days", "is not an exact duration across a daylight-saving change"},
		{"1 day", "is not an exact duration across a daylight-saving change"},
		{"3 weeks", "names weeks"},
		{"1 month", "names months"},
		{"5 working days", "names days"},
		{"P1D", "ISO-8601 date components"},
		{"P2DT3H", "ISO-8601 date components"},
		{"P1W", "ISO-8601 date components"},
		{"P1M", "ISO-8601 date components"},
		{"P1Y", "ISO-8601 date components"},
		{"PT1D", "is not an exact duration across a daylight-saving change"},
		{"P", "no time components"},
		{"PT", "no time components"},
		{"PT1M1H", "repeats or misorders"},
		{"PT1H1H", "repeats or misorders"},
		{"30m1h", "repeats or misorders"},
		{"1h1h", "repeats or misorders"},
		{"10us10µs", "repeats or misorders"},
		{"pt48h", "not a duration"},
		{"PT48h", "unknown unit"},
		{"48H", "unknown unit"},
		{"48", "not a duration"},
		{"h", "not a duration"},
		{"48 h", "unknown unit"},
		{" 48h", "not a duration"},
		{"48h ", "unknown unit"},
		{"1.h", "not a decimal number"},
		{".5h", "not a decimal number"},
		{"1.2.3h", "not a decimal number"},
		{"0.1ns", "not a whole number of nanoseconds"},
		{"PT0,5H", "unknown unit"},
		{"0s", "not positive"},
		{"0h0m", "not positive"},
		{"PT0S", "not positive"},
		{"-1h", "negative"},
		{"+1h", "not a duration"},
		{"87660h1ns", "longer than the maximum"},
		{"87661h", "longer than the maximum"},
		{"9223372036854775807ns9223372036854775807ns", "longer than the maximum"},
		{"99999999999999999999999999999h", "longer than the maximum"},
		{"9999999999999999999999999999999h", "longer than the maximum"},
		{strings.Repeat("1", 65) + "ns", "longer than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			got, err := calendar.Durations{}.Resolve(from, tt.spec)
			require.True(t, got.IsZero())
			requireRefused(t, err, tt.part)
		})
	}

	_, err := calendar.Durations{}.Resolve(time.Time{}, "1h")
	requireRefused(t, err, "zero time")
}

// Specs built at random from hours, minutes, seconds and nanoseconds resolve
// to what time.ParseDuration says they mean, written in either syntax.
func TestDurationsMatchParseDuration(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	from := utc(2027, 10, 30, 23, 0)
	for range 2000 {
		h, m, s := rng.IntN(87660), rng.IntN(60), rng.IntN(60)
		goSpec := fmt.Sprintf("%dh%dm%ds", h, m, s)
		want, err := time.ParseDuration(goSpec)
		require.NoError(t, err)
		if want == 0 {
			continue
		}
		got, err := calendar.Durations{}.Resolve(from, goSpec)
		require.NoError(t, err, goSpec)
		require.Equal(t, want, got.Sub(from), goSpec)

		got, err = calendar.Durations{}.Resolve(from, fmt.Sprintf("PT%dH%dM%dS", h, m, s))
		require.NoError(t, err)
		require.Equal(t, want, got.Sub(from))

		ns := rng.Int64N(int64(calendar.MaxDuration)) + 1
		got, err = calendar.Durations{}.Resolve(from, fmt.Sprintf("%dns", ns))
		require.NoError(t, err)
		require.Equal(t, time.Duration(ns), got.Sub(from))
	}
}

func TestDurationsDigest(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("docket.calendar.durations/v1\n"))
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), calendar.Durations{}.Digest())
	var cal calendar.Calendar = calendar.Durations{}
	require.Equal(t, cal.Digest(), calendar.Durations{}.Digest())

	business, err := calendar.NewBusinessDays(calendar.BusinessDaysConfig{Zone: "UTC"})
	require.NoError(t, err)
	require.NotEqual(t, business.Digest(), cal.Digest())
}

// FuzzDurationsResolve: any spec either resolves to from plus a duration in
// (0, MaxDuration] that time.ParseDuration agrees with where it accepts the
// spec, or is refused as an invalid argument; nothing panics.
func FuzzDurationsResolve(f *testing.F) {
	for _, s := range []string{"48h", "1h30m", "PT48H", "PT1H30M", "0.5h", "1d", "P1D", "-1h", "87660h", "10µs", "1.5ms", ""} {
		f.Add(s)
	}
	from := utc(2027, 3, 27, 12, 0)
	f.Fuzz(func(t *testing.T, spec string) {
		got, err := calendar.Durations{}.Resolve(from, spec)
		if err != nil {
			requireRefused(t, err)
			return
		}
		d := got.Sub(from)
		require.Greater(t, d, time.Duration(0))
		require.LessOrEqual(t, d, calendar.MaxDuration)
		if want, perr := time.ParseDuration(spec); perr == nil && !strings.Contains(spec, ".") {
			require.Equal(t, want, d, spec)
		}
		again, err := calendar.Durations{}.Resolve(from, spec)
		require.NoError(t, err)
		require.True(t, got.Equal(again))
	})
}
