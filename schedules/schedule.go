package schedules

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/schedules"
)

// Bounds and defaults of a schedule's terms.
const (
	// MaxCron is the longest cron expression accepted, in bytes.
	MaxCron = 200
	// MaxCatchUp bounds [Spec].MaxCatchUp.
	MaxCatchUp = 1000
	// DefaultMaxCatchUp is [Spec].MaxCatchUp when zero.
	DefaultMaxCatchUp = 10
	// DefaultGrace is [Spec].Grace when zero.
	DefaultGrace = 5 * time.Minute
	// MaxGrace bounds [Spec].Grace; the least is one second.
	MaxGrace = 24 * time.Hour
	// MaxReason bounds [Spec].UnboundedReason and a broken schedule's
	// reason, in characters.
	MaxReason = 500
)

// CatchUp is a schedule's policy for occurrences missed while nothing swept
// it (downtime) or while it was paused: those more than its grace late when
// the sweep reaches them.
type CatchUp string

// The catch-up policies. Missed occurrences not run are recorded as one
// skipped window ([EventSkipped]), never dropped silently.
const (
	// CatchUpSkip runs none of the missed occurrences: the next run is the
	// next on-time one.
	CatchUpSkip CatchUp = "skip"
	// CatchUpOne runs one occurrence for everything missed: the latest.
	CatchUpOne CatchUp = "one"
	// CatchUpAll runs the missed occurrences, the latest MaxCatchUp of them.
	CatchUpAll CatchUp = "all"
)

// Status is where a schedule is in its life.
type Status string

// The statuses: active ↔ paused, either → finished (terminal); active →
// broken → active, paused or finished.
const (
	Active   Status = "active"
	Paused   Status = "paused"
	Finished Status = "finished"
	// Broken is a schedule the sweep could not plan, or whose plan the
	// database refused: [Schedule].BrokenReason says why. The sweep passes
	// it over, and the schedules behind it advance, until [Client.Update]
	// or [Client.Resume] mends it.
	Broken Status = "broken"
)

// Job is the job each occurrence enqueues, in the schedule's project.
type Job struct {
	Kind string
	// Queue defaults to "default".
	Queue   string
	Payload json.RawMessage
	// PayloadSchema defaults to 1.
	PayloadSchema int
	// MaxAttempts defaults to 5.
	MaxAttempts int
}

// Spec is what a schedule is created or updated with.
type Spec struct {
	// Project and Name identify the schedule (Name is unique in the
	// project: 1-63 characters of [a-z0-9._-]). Ignored by Update.
	Project, Name string
	// Cron is a five-field cron expression or descriptor ([ParseCron]).
	Cron string
	// Zone is the IANA zone its local times are in, e.g. Europe/Berlin.
	Zone string
	Job  Job
	// CatchUp is the policy for missed occurrences. Defaults to
	// [CatchUpSkip].
	CatchUp CatchUp
	// MaxCatchUp bounds the missed occurrences [CatchUpAll] runs: 1..
	// [MaxCatchUp]. Defaults to [DefaultMaxCatchUp].
	MaxCatchUp int
	// Grace is how late an occurrence may be swept and still be on time
	// rather than missed: 1s .. [MaxGrace]. Keep it above the sweep period.
	// Defaults to [DefaultGrace].
	Grace time.Duration
	// Start: occurrences are those strictly after it. Defaults to the
	// client's now. Ignored by Update.
	Start time.Time
	// End, when set, is the last instant an occurrence may have.
	End time.Time
	// MaxOccurrences, when positive, bounds how many occurrences run; a
	// negative value is refused.
	MaxOccurrences int64
	// Unbounded declares that the schedule runs forever: it has neither End
	// nor MaxOccurrences, and UnboundedReason says why. A schedule needs End,
	// MaxOccurrences or Unbounded; Unbounded beside a bound is refused.
	Unbounded bool
	// UnboundedReason is why an Unbounded schedule runs forever, recorded
	// on the schedule and in its created event: 1-[MaxReason] characters of
	// text, no control characters. Only with Unbounded.
	UnboundedReason string
}

// Schedule is a schedule as stored.
type Schedule struct {
	ID        int64
	Project   string
	Name      string
	Cron      string
	Zone      string
	FixedTime bool
	Job       Job
	CatchUp   CatchUp
	// MaxCatchUp and Grace as in [Spec].
	MaxCatchUp     int
	Grace          time.Duration
	Start          time.Time
	End            time.Time // zero: none
	MaxOccurrences int64     // zero: none
	// UnboundedReason is why the schedule has neither End nor
	// MaxOccurrences; empty when it has one.
	UnboundedReason string
	// Runs is how many occurrences were materialized.
	Runs   int64
	Status Status
	// Cursor is the instant after which the next occurrence is sought.
	Cursor time.Time
	// NextDue is that occurrence's instant; zero when finished.
	NextDue    time.Time
	CreatedBy  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time
	// BrokenReason and BrokenAt say why and since when a [Broken] schedule
	// cannot be planned; empty and zero otherwise.
	BrokenReason string
	BrokenAt     time.Time
}

func fromRow(r *dbsqlc.DocketSchedule) Schedule {
	s := Schedule{
		ID: r.ID, Project: r.Project, Name: r.Name, Cron: r.Cron, Zone: r.Zone, FixedTime: r.FixedTime,
		Job: Job{Kind: r.JobKind, Queue: r.JobQueue, Payload: r.JobPayload, PayloadSchema: int(r.JobPayloadSchema),
			MaxAttempts: int(r.JobMaxAttempts)},
		CatchUp: CatchUp(r.CatchUp), MaxCatchUp: int(r.MaxCatchUp), Grace: r.Grace, Start: r.StartsAt.UTC(),
		Runs: r.Runs, Status: Status(r.Status), Cursor: r.CursorAt.UTC(),
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if r.EndsAt != nil {
		s.End = r.EndsAt.UTC()
	}
	if r.MaxOccurrences != nil {
		s.MaxOccurrences = *r.MaxOccurrences
	}
	if r.NextDueAt != nil {
		s.NextDue = r.NextDueAt.UTC()
	}
	if r.FinishedAt != nil {
		s.FinishedAt = r.FinishedAt.UTC()
	}
	if r.UnboundedReason != nil {
		s.UnboundedReason = *r.UnboundedReason
	}
	if r.BrokenReason != nil {
		s.BrokenReason = *r.BrokenReason
	}
	if r.BrokenAt != nil {
		s.BrokenAt = r.BrokenAt.UTC()
	}
	return s
}

// terms returns what planning reads of s.
func (s Schedule) terms() (terms, error) {
	c, err := ParseCron(s.Cron)
	if err != nil {
		return terms{}, err
	}
	loc, err := loadZone(s.Zone)
	if err != nil {
		return terms{}, &zoneError{err}
	}
	return terms{cron: c, loc: loc, catchUp: s.CatchUp, maxCatchUp: s.MaxCatchUp, grace: s.Grace, endsAt: s.End,
		maxOccurrences: s.MaxOccurrences, runs: s.Runs, cursor: s.Cursor}, nil
}

// zoneError is a schedule's zone that this machine's tz database does not
// hold: the machine's want, not the schedule's fault.
type zoneError struct{ err error }

func (e *zoneError) Error() string { return e.err.Error() }
func (e *zoneError) Unwrap() error { return e.err }

// checked is a Spec with its defaults applied, parsed and validated.
type checked struct {
	Spec
	cron Cron
	loc  *time.Location
}

// check applies spec's defaults and refuses, with [db.ErrInvalidArgument]
// naming the field, what the database cannot judge or says less plainly:
// the expression, the zone, the catch-up terms and the bounds.
func check(op string, spec Spec, now time.Time) (checked, error) {
	refuse := func(field, why string) (checked, error) {
		return checked{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid %s: %s", field, why))
	}
	c, err := ParseCron(spec.Cron)
	if err != nil {
		return checked{}, db.Refuse(db.ErrInvalidArgument, op, err.Error())
	}
	loc, err := loadZone(spec.Zone)
	if err != nil {
		return checked{}, db.Refuse(db.ErrInvalidArgument, op, err.Error())
	}
	if spec.Job.Queue == "" {
		spec.Job.Queue = "default"
	}
	if spec.Job.PayloadSchema == 0 {
		spec.Job.PayloadSchema = 1
	}
	if spec.Job.MaxAttempts == 0 {
		spec.Job.MaxAttempts = 5
	}
	if len(spec.Job.Payload) == 0 {
		spec.Job.Payload = json.RawMessage(`{}`)
	}
	if !json.Valid(spec.Job.Payload) {
		return refuse("job payload", "not JSON")
	}
	switch spec.CatchUp {
	case "":
		spec.CatchUp = CatchUpSkip
	case CatchUpSkip, CatchUpOne, CatchUpAll:
	default:
		return refuse("catch_up", fmt.Sprintf("%q: want skip, one or all", spec.CatchUp))
	}
	if spec.MaxCatchUp == 0 {
		spec.MaxCatchUp = DefaultMaxCatchUp
	}
	if spec.MaxCatchUp < 1 || spec.MaxCatchUp > MaxCatchUp {
		return refuse("max_catch_up", fmt.Sprintf("%d: want 1..%d", spec.MaxCatchUp, MaxCatchUp))
	}
	if spec.Grace == 0 {
		spec.Grace = DefaultGrace
	}
	if spec.Grace < time.Second || spec.Grace > MaxGrace {
		return refuse("grace", fmt.Sprintf("%v: want 1s .. %v", spec.Grace, MaxGrace))
	}
	if spec.Start.IsZero() {
		spec.Start = now
	}
	spec.Start = spec.Start.UTC().Truncate(time.Microsecond)
	if spec.MaxOccurrences < 0 {
		return refuse("max_occurrences", fmt.Sprintf("%d: want 1 or more, or 0 for no bound", spec.MaxOccurrences))
	}
	if !spec.End.IsZero() {
		spec.End = spec.End.UTC().Truncate(time.Microsecond)
		if !spec.End.After(spec.Start) {
			return refuse("ends_at", fmt.Sprintf("%s is not after the start %s", spec.End.Format(time.RFC3339), spec.Start.Format(time.RFC3339)))
		}
	}
	bounded := !spec.End.IsZero() || spec.MaxOccurrences > 0
	switch {
	case !bounded && !spec.Unbounded:
		return refuse("ends_at, max_occurrences or unbounded_reason",
			"a schedule needs a bound: End (ends_at) or MaxOccurrences (max_occurrences); "+
				"to run forever, Unbounded: true with UnboundedReason (unbounded_reason)")
	case bounded && spec.Unbounded:
		return refuse("unbounded_reason", "Unbounded beside End or MaxOccurrences: a bounded schedule does not run forever")
	case !spec.Unbounded && spec.UnboundedReason != "":
		return refuse("unbounded_reason", "given without Unbounded: true")
	case spec.Unbounded:
		if err := checkReason(spec.UnboundedReason); err != nil {
			return refuse("unbounded_reason", err.Error())
		}
	}
	return checked{Spec: spec, cron: c, loc: loc}, nil
}

// checkReason refuses a reason the database would: empty or blank, longer
// than [MaxReason] characters, not UTF-8, or with control characters.
func checkReason(r string) error {
	n := utf8.RuneCountInString(r)
	switch {
	case !utf8.ValidString(r):
		return errors.New("not UTF-8 text")
	case strings.TrimSpace(r) == "":
		return errors.New("empty: say why the schedule runs forever")
	case n > MaxReason:
		return fmt.Errorf("%d characters: at most %d", n, MaxReason)
	case strings.ContainsFunc(r, unicode.IsControl):
		return errors.New("control characters: want one line of text")
	}
	return nil
}

// loadZone loads an IANA zone, refusing (naming the field "zone") an empty
// name, "Local" (whose meaning depends on the host) and unknown zones.
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, fmt.Errorf("invalid zone %q: want an IANA time zone name, e.g. Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("invalid zone %q: not in the time zone database", name)
	}
	return loc, nil
}

func isNoOccurrence(err error) bool { return errors.Is(err, ErrNoOccurrence) }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func stringPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func int64Ptr(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}
