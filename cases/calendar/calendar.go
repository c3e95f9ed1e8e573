package calendar

import "time"

// Calendar resolves deadline specs to instants. An implementation must be
// deterministic: the same from and spec always give the same instant, and
// Digest changes whenever any rule that could change an answer changes.
// The package's own are [Durations] and [BusinessDays]; the instant a
// Calendar returns is what gets stored, never recomputed.
type Calendar interface {
	// Resolve returns the instant spec names, counted from from. It refuses
	// a spec it cannot resolve exactly with db.ErrInvalidArgument, naming
	// why; it never approximates.
	Resolve(from time.Time, spec string) (time.Time, error)
	// Digest identifies the calendar's rules: "sha256:" and 64 hex digits
	// over a canonical encoding of every rule (kind, zone, weekend, holidays,
	// cut-off...).
	Digest() string
}
