package plans

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/docket-dev/docket/access"
)

// WaitType says what a waiting step waits for.
type WaitType string

const (
	// WaitSleep: a durable sleep, until an instant or for a duration from
	// the step's admission.
	WaitSleep WaitType = "sleep"
	// WaitMessage: an inbound message filed under the wait's kind and
	// correlation key, before a deadline.
	WaitMessage WaitType = "message"
	// WaitTask: a human task's decision, four eyes.
	WaitTask WaitType = "task"
)

// MaxWaitAhead bounds how far ahead a waiting step's instant or deadline
// may be: that of every wait, timer and task.
const MaxWaitAhead = 3650 * 24 * time.Hour

// Wait makes a step a waiting step: instead of a job, the step registers
// what it waits on -- a timer, a wait for a message, or a human task, the
// same rows a case's waits, timers and tasks are, owned by the run's step --
// and the run is suspended on it, holding no job, no worker and no lease.
// When the timer fires, the message arrives or the task is decided (or
// expires), the step succeeds with that answer as its result and the run
// moves on. Build one with [Sleep], [SleepUntil], [AwaitMessage] or
// [Approval]. A waiting step's Kind is [WaitKind] of its type (left empty,
// it is filled in), it names no compensation, and its Args are what it
// shows (a task's proposal).
type Wait struct {
	Type WaitType `json:"type"`
	// Sleep: Until, an instant, or For, seconds after the step's admission
	// (exactly one).
	Until *time.Time `json:"until,omitempty"`
	For   int64      `json:"for,omitempty"`
	// Message: the message is filed under the keys kind:MessageKind and
	// Key:VALUE, VALUE the string (or number) Value's source gives, as an
	// argument's; a step or path source is a direct predecessor (in After).
	MessageKind string  `json:"kind,omitempty"`
	Key         string  `json:"key,omitempty"`
	Value       *Source `json:"value,omitempty"`
	// Within is, for a message, the seconds after the step's admission to
	// its deadline (no message by then fails the step, and the run
	// unwinds); for a task, to the task's deadline, where its expiry policy
	// applies.
	Within int64 `json:"within,omitempty"`
	// Task: what the reviewer sees, what it may decide, who may take it,
	// and its declared expiry policy: OnExpiry "decide" (AutoDecision, one
	// of Decisions, resumes the run) or "escalate" (to EscalateTo and
	// EscalateCaps, for EscalateWithin more seconds). Whoever started the
	// run may not answer it (four eyes).
	Title          string   `json:"title,omitempty"`
	Summary        string   `json:"summary,omitempty"`
	Decisions      []string `json:"decisions,omitempty"`
	Audience       []string `json:"audience,omitempty"`
	AudienceCaps   []string `json:"audience_caps,omitempty"`
	OnExpiry       string   `json:"on_expiry,omitempty"`
	AutoDecision   string   `json:"auto_decision,omitempty"`
	EscalateTo     []string `json:"escalate_to,omitempty"`
	EscalateCaps   []string `json:"escalate_caps,omitempty"`
	EscalateWithin int64    `json:"escalate_within,omitempty"`
}

// WaitKind is the kind a waiting step of type t records: docket.wait.TYPE.
func WaitKind(t WaitType) string { return "docket.wait." + string(t) }

// Sleep is a durable sleep of d (whole seconds) from the step's admission.
func Sleep(d time.Duration) *Wait { return &Wait{Type: WaitSleep, For: int64(d / time.Second)} }

// SleepUntil is a durable sleep until at.
func SleepUntil(at time.Time) *Wait {
	u := at.UTC()
	return &Wait{Type: WaitSleep, Until: &u}
}

// AwaitMessage waits for a message filed under kind:kind and key:VALUE,
// VALUE from value, for within (whole seconds) from the step's admission.
func AwaitMessage(kind, key string, value Source, within time.Duration) *Wait {
	return &Wait{Type: WaitMessage, MessageKind: kind, Key: key, Value: &value, Within: int64(within / time.Second)}
}

// TaskSpec declares the human task of an [Approval] step.
type TaskSpec struct {
	Title, Summary string
	Decisions      []string
	Audience       []access.Actor
	AudienceCaps   []access.Capability
	// Within is how long after the step's admission the task's deadline
	// falls (whole seconds).
	Within time.Duration
	// AutoDecision, when set, is decided at the deadline (on_expiry
	// decide); otherwise the task escalates to EscalateTo and EscalateCaps
	// for EscalateFor more.
	AutoDecision string
	EscalateTo   []access.Actor
	EscalateCaps []access.Capability
	EscalateFor  time.Duration
}

// Approval opens a human task and waits for its decision.
func Approval(t TaskSpec) *Wait {
	w := &Wait{Type: WaitTask, Title: t.Title, Summary: t.Summary, Decisions: t.Decisions, Within: int64(t.Within / time.Second)}
	for _, a := range t.Audience {
		w.Audience = append(w.Audience, string(a))
	}
	for _, c := range t.AudienceCaps {
		w.AudienceCaps = append(w.AudienceCaps, string(c))
	}
	if t.AutoDecision != "" {
		w.OnExpiry, w.AutoDecision = "decide", t.AutoDecision
	} else {
		w.OnExpiry, w.EscalateWithin = "escalate", int64(t.EscalateFor/time.Second)
		for _, a := range t.EscalateTo {
			w.EscalateTo = append(w.EscalateTo, string(a))
		}
		for _, c := range t.EscalateCaps {
			w.EscalateCaps = append(w.EscalateCaps, string(c))
		}
	}
	return w
}

var (
	waitNamespace = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	waitDecision  = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,62}$`)
)

// waitProblems is what is wrong with waiting step s, each a reason.
func waitProblems(s Step) []string {
	w := s.Wait
	var out []string
	bad := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	if s.Kind != "" && s.Kind != WaitKind(w.Type) {
		bad("a waiting step's kind is %s, not %s", WaitKind(w.Type), quote(s.Kind))
	}
	if s.Compensation != "" {
		bad("a waiting step names no compensation: it did nothing to undo")
	}
	maxSecs := int64(MaxWaitAhead / time.Second)
	switch w.Type {
	case WaitSleep:
		switch {
		case (w.Until == nil) == (w.For == 0):
			bad("a sleep is until an instant or for a duration: exactly one")
		case w.For < 0 || w.For > maxSecs:
			bad("a sleep of %d seconds: want 1..%d", w.For, maxSecs)
		}
	case WaitMessage:
		if !waitNamespace.MatchString(w.MessageKind) {
			bad("invalid message kind %s: want 1-63 characters of [a-z0-9._-], starting with a letter or digit", quote(w.MessageKind))
		}
		if !waitNamespace.MatchString(w.Key) {
			bad("invalid correlation key %s: want 1-63 characters of [a-z0-9._-], starting with a letter or digit", quote(w.Key))
		}
		switch {
		case w.Value == nil:
			bad("an await names its correlation value's source")
		case w.Value.Kind == FromStepResult || w.Value.Kind == FromStepPath:
			if !slices.Contains(s.After, w.Value.Step) {
				bad("the correlation value's source step %s is not a direct predecessor", showID(w.Value.Step))
			}
		case w.Value.Kind != FromRunInput && w.Value.Kind != FromConstant:
			bad("unknown correlation value source kind %s", quote(string(w.Value.Kind)))
		}
		if w.Within <= 0 || w.Within > maxSecs {
			bad("an await's deadline is 1..%d seconds after its admission, not %d", maxSecs, w.Within)
		}
	case WaitTask:
		if len(w.Decisions) == 0 || len(w.Decisions) > 16 {
			bad("a task has 1-16 decisions")
		}
		for _, d := range w.Decisions {
			if !waitDecision.MatchString(d) {
				bad("invalid decision %s", quote(d))
			}
		}
		if len(w.Audience)+len(w.AudienceCaps) == 0 {
			bad("a task has an audience: principals or capabilities")
		}
		if w.Title == "" || len(w.Title) > 200 {
			bad("a task's title is 1-200 characters")
		}
		if w.Within <= 0 || w.Within > maxSecs {
			bad("a task's deadline is 1..%d seconds after its admission, not %d", maxSecs, w.Within)
		}
		switch w.OnExpiry {
		case "decide":
			if !slices.Contains(w.Decisions, w.AutoDecision) {
				bad("the automatic decision %s is not one of the task's decisions", quote(w.AutoDecision))
			}
		case "escalate":
			if len(w.EscalateTo)+len(w.EscalateCaps) == 0 || w.EscalateWithin < 60 || w.EscalateWithin > 366*24*3600 {
				bad("an escalating task names whom it escalates to, for 1 minute to 366 days")
			}
		default:
			bad("a task's expiry policy is decide or escalate, not %s", quote(w.OnExpiry))
		}
	default:
		bad("unknown wait type %s: want sleep, message or task", quote(string(w.Type)))
	}
	return out
}
