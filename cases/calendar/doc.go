// Package calendar turns deadline specs into instants: the seam through which
// an obligation's "5 working days at 17:00" becomes the timestamp docket
// stores and sweeps for.
//
// A [Calendar] resolves a spec, counted from an instant, to an instant, and
// names its rules with a digest. Registering an obligation stores both the
// resolved instant and the digest; nothing recomputes the instant later. The
// stored instant is the record: a corrected holiday list, a changed cut-off
// or a new release of the time-zone database cannot move an obligation
// someone already relied on, and the digest beside it says which rules
// produced it, so a changed rule is visible rather than silent.
//
// A calendar refuses what it cannot resolve exactly, with an error that
// matches db.ErrInvalidArgument (DK010) and says why. It never approximates:
// a wrong deadline looks exactly like a right one.
//
// # Durations
//
// [Durations] resolves exact elapsed durations: from plus the duration. A
// spec is a Go-style duration ("48h", "1h30m", "90m", "0.5h") or an ISO-8601
// time duration ("PT48H", "PT1H30M"). Days, weeks, months and years are
// refused: a day is 23, 24 or 25 hours long depending on daylight saving, so
// it is not an exact duration; say 24h, or use [BusinessDays].
//
// # Business days
//
// [BusinessDays] counts working days in one IANA time zone, given its weekend
// days, a holiday list and a cut-off local time. Its spec grammar is exact,
// lower case, single spaces, nothing around it:
//
//	spec  = count " " kind " " unit [ " at " clock ]
//	count = 1 … 1000 in decimal, no sign, no leading zero
//	kind  = "working" | "business"          (synonyms)
//	unit  = "day" when count is 1, else "days"
//	clock = HH ":" MM, 00:00 … 23:59        (the deadline's local time)
//
// For example "5 working days", "1 business day", "10 working days at 12:00".
// One spelling per meaning keeps recorded specs comparable; anything else,
// "5 days" and "five working days" included, is refused.
//
// Counting. Let D be the local date of from in the calendar's zone. from is
// received on D when D is a working day and from is strictly before the
// cut-off on D; otherwise (at or after the cut-off, or on a weekend day or
// holiday) it is received on the next working day. The deadline is the Nth
// working day after the day of receipt, at the spec's clock time, or at the
// cut-off when the spec names none. So a request on Wednesday at 10:00 with
// "5 working days" is due on the next Wednesday at the cut-off; the same
// request at 18:00 is due on the next Thursday. A working day is a date that
// is neither a weekend day nor a holiday and that the zone's clocks read at
// all (a date-line move can skip a whole date, as Samoa skipped 2011-12-30).
// The deadline is always strictly after from.
//
// Daylight saving. The deadline's local time is turned into an instant only
// when it names exactly one. A local time that does not exist on the
// deadline's date (skipped when clocks go forward) or that occurs twice
// (repeated when clocks go back) is refused, naming the date, the time and
// the zone. Whether from is before the cut-off is decided by instants: a
// cut-off that the clocks skip on D has passed once the clocks have jumped
// past it, and a from that falls between the two occurrences of a repeated
// cut-off is refused as ambiguous. Offsets are read from the zone's
// transitions around the date, not from time.Date's normalisation.
//
// Ranges. Every date the count touches, from D to the deadline's date, must
// lie within the calendar's known range (BusinessDaysConfig.KnownFrom …
// KnownThrough, by default 1970-01-01 … 2199-12-31): outside it the calendar
// cannot say whether a date is a holiday, so it refuses. A count that needs
// more than [MaxScanDays] calendar days is refused too.
//
// # Digests
//
// Digest is "sha256:" and 64 hex digits over a canonical, versioned encoding
// of every rule: for [BusinessDays] the kind, the zone's name, the sorted
// weekend days, the sorted holidays, the cut-off and the known range. Two
// calendars with the same rules have the same digest, whatever order or
// duplicates their configuration listed; any change of a rule changes it.
// The digest covers the zone's name, not the machine's time-zone database:
// a different tzdata release can resolve the same spec differently, which is
// one more reason the stored instant, not a recomputation, is the record.
//
// Loading a zone needs a time-zone database: the system's, or the copy a
// program embeds by importing time/tzdata.
package calendar
