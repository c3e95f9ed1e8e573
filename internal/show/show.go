// Package show words docket's values for people: the one-line texts the
// docket command's tables and the console's pages share, so that both say
// a duration, a budget, a task's audience or a run's output alike.
package show

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/docket-dev/docket/budgets"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/tasks"
)

// OutputShown is how many characters of a run's output [Output] shows.
const OutputShown = 1000

// Dash shows an empty field as "-".
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// JoinStates lists the values of a state type.
func JoinStates[S ~string](states []S) string {
	s := make([]string, len(states))
	for i, x := range states {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// Printable shows untrusted text on one line: runs of white space become
// one space, and control and bidirectional formatting characters, which
// could reorder what is shown, become U+FFFD.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return unicode.ReplacementChar
		}
		return r
	}, strings.Join(strings.Fields(s), " "))
}

// Cut shortens s to at most n characters, the last of them "…".
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// TimeLeft shows the time to a deadline, or how long ago it passed: a
// waiting wait past its deadline waits for the expiry sweep.
func TimeLeft(d time.Duration) string {
	if d < 0 {
		return "overdue " + Span(-d)
	}
	return Span(d)
}

// Span shows a non-negative duration: to the second under a day, else in
// days, hours and minutes (cut, not rounded).
func Span(d time.Duration) string {
	const day = 24 * time.Hour
	if d < day {
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%dd%02dh%02dm", d/day, d%day/time.Hour, d%time.Hour/time.Minute)
}

// DueIn says how long until a deadline, or how long ago it passed.
func DueIn(d time.Duration) string {
	if d < 0 {
		return "overdue " + Span(-d)
	}
	return "due in " + Span(d)
}

// Expiry says what a task's deadline does, or did.
func Expiry(t tasks.Task) string {
	if d, ok := t.Expiry.Automatic(); ok {
		return fmt.Sprintf("decides %s automatically, as its opening by %s signed", d, t.OpenedBy)
	}
	to, caps, after := t.Expiry.EscalatesTo()
	var who []string
	if len(caps) > 0 {
		who = append(who, "holders of "+JoinStates(caps))
	}
	if len(to) > 0 {
		who = append(who, JoinStates(to))
	}
	if t.EscalatedAt != nil {
		return fmt.Sprintf("escalated at %s to %s; owed nothing further", t.EscalatedAt.UTC().Format(time.RFC3339), strings.Join(who, " and "))
	}
	return fmt.Sprintf("escalates to %s, then due %s later", strings.Join(who, " and "), Span(after))
}

// Audience says who may take a task.
func Audience(t tasks.Task) string {
	var who []string
	if len(t.AudienceCaps) > 0 {
		who = append(who, fmt.Sprintf("holders of %s on %s", JoinStates(t.AudienceCaps), t.Project))
	}
	if len(t.Audience) > 0 {
		who = append(who, JoinStates(t.Audience))
	}
	return strings.Join(who, "; ")
}

// Keys shows keys as namespace:value, comma separated.
func Keys(keys []cases.Key) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.Namespace + ":" + k.Value
	}
	return Dash(strings.Join(s, ","))
}

// Budget lists the ceilings b sets, money in minor units of its
// currency.
func Budget(b budgets.Budget) string {
	var parts []string
	if b.MaxSteps > 0 {
		parts = append(parts, fmt.Sprintf("steps %d", b.MaxSteps))
	}
	if b.MaxEffects > 0 {
		parts = append(parts, fmt.Sprintf("effects %d", b.MaxEffects))
	}
	if b.MaxMoney.Currency != "" {
		parts = append(parts, fmt.Sprintf("money %d %s", b.MaxMoney.Amount, b.MaxMoney.Currency))
	}
	if b.MaxCall > 0 {
		parts = append(parts, fmt.Sprintf("max call %d %s", b.MaxCall, b.MaxMoney.Currency))
	}
	if b.MaxParallel > 0 {
		parts = append(parts, fmt.Sprintf("max in flight %d", b.MaxParallel))
	}
	return strings.Join(parts, ", ")
}

// Spent is what a run's steps reported they spent, money in its
// budget's currency when it has one.
func Spent(b budgets.Budget, s budgets.Spent) string {
	money := strconv.FormatInt(s.Money, 10)
	if b.MaxMoney.Currency != "" {
		money += " " + b.MaxMoney.Currency
	}
	return fmt.Sprintf("effects %d, money %s", s.Effects, money)
}

// NotAdmitted is what a step a run has not admitted is now: waiting while
// the run runs, held while it is exhausted, else never run.
func NotAdmitted(r plans.Run) string {
	switch r.Status {
	case plans.Running:
		return "waiting"
	case plans.Exhausted:
		return "held"
	}
	return "not run"
}

// JobOutput renders an output as "asset (kind) under root".
func JobOutput(o jobs.OutputRef) string {
	s := o.Asset
	if o.Kind != "" {
		s += " (" + o.Kind + ")"
	}
	if o.Root != "" {
		s += " under " + o.Root
	}
	return s
}

// CompactJSON shows JSON on one line; null and nothing as "".
func CompactJSON(j json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, j); err != nil {
		return string(j)
	}
	if s := b.String(); s != "null" {
		return s
	}
	return ""
}

// Output is a run's output on one line, cut at OutputShown
// characters with how many there are and whole, where to read all of it;
// "" when it has none.
func Output(o json.RawMessage, whole string) string {
	s := CompactJSON(o)
	if utf8.RuneCountInString(s) > OutputShown {
		s = Cut(s, OutputShown) + fmt.Sprintf(" (%d bytes in all; %s)", len(s), whole)
	}
	return Printable(s)
}
