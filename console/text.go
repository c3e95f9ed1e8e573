package console

import (
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

// consoleShowOutput is how many characters of a run's output its page
// shows.
const consoleShowOutput = 1000

// dash shows an empty field as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// joinStates lists the values of a state type.
func joinStates[S ~string](states []S) string {
	s := make([]string, len(states))
	for i, x := range states {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// printable shows untrusted text on one line: runs of white space become
// one space, and control and bidirectional formatting characters, which
// could reorder what is shown, become U+FFFD.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return unicode.ReplacementChar
		}
		return r
	}, strings.Join(strings.Fields(s), " "))
}

// cut shortens s to at most n characters, the last of them "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// timeLeft shows the time to a deadline, or how long ago it passed: a
// waiting wait past its deadline waits for the expiry sweep.
func timeLeft(d time.Duration) string {
	if d < 0 {
		return "overdue " + span(-d)
	}
	return span(d)
}

// span shows a non-negative duration: to the second under a day, else in
// days, hours and minutes (cut, not rounded).
func span(d time.Duration) string {
	const day = 24 * time.Hour
	if d < day {
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%dd%02dh%02dm", d/day, d%day/time.Hour, d%time.Hour/time.Minute)
}

// dueIn says how long until a deadline, or how long ago it passed.
func dueIn(d time.Duration) string {
	if d < 0 {
		return "overdue " + span(-d)
	}
	return "due in " + span(d)
}

// expiryText says what a task's deadline does, or did.
func expiryText(t tasks.Task) string {
	if d, ok := t.Expiry.Automatic(); ok {
		return fmt.Sprintf("decides %s automatically, as its opening by %s signed", d, t.OpenedBy)
	}
	to, caps, after := t.Expiry.EscalatesTo()
	var who []string
	if len(caps) > 0 {
		who = append(who, "holders of "+joinStates(caps))
	}
	if len(to) > 0 {
		who = append(who, joinStates(to))
	}
	if t.EscalatedAt != nil {
		return fmt.Sprintf("escalated at %s to %s; owed nothing further", t.EscalatedAt.UTC().Format(time.RFC3339), strings.Join(who, " and "))
	}
	return fmt.Sprintf("escalates to %s, then due %s later", strings.Join(who, " and "), span(after))
}

// audienceText says who may take a task.
func audienceText(t tasks.Task) string {
	var who []string
	if len(t.AudienceCaps) > 0 {
		who = append(who, fmt.Sprintf("holders of %s on %s", joinStates(t.AudienceCaps), t.Project))
	}
	if len(t.Audience) > 0 {
		who = append(who, joinStates(t.Audience))
	}
	return strings.Join(who, "; ")
}

// joinKeys shows keys as namespace:value, comma separated.
func joinKeys(keys []cases.Key) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.Namespace + ":" + k.Value
	}
	return dash(strings.Join(s, ","))
}

// budgetText lists the ceilings b sets, money in minor units of its
// currency.
func budgetText(b budgets.Budget) string {
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

// spentText is what a run's steps reported they spent, money in its
// budget's currency when it has one.
func spentText(b budgets.Budget, s budgets.Spent) string {
	money := strconv.FormatInt(s.Money, 10)
	if b.MaxMoney.Currency != "" {
		money += " " + b.MaxMoney.Currency
	}
	return fmt.Sprintf("effects %d, money %s", s.Effects, money)
}

// outputText is a run's output on one line, cut at consoleShowOutput
// characters; "" when it has none.
func outputText(o json.RawMessage) string {
	s := compactJSON(o)
	if utf8.RuneCountInString(s) > consoleShowOutput {
		s = cut(s, consoleShowOutput) + fmt.Sprintf(" (%d bytes in all; the API reads it whole)", len(s))
	}
	return printable(s)
}

// notAdmitted is what a step a run has not admitted is now: waiting while
// the run runs, held while it is exhausted, else never run.
func notAdmitted(r plans.Run) string {
	switch r.Status {
	case plans.Running:
		return "waiting"
	case plans.Exhausted:
		return "held"
	}
	return "not run"
}

// jobOutputText renders an output as "asset (kind) under root".
func jobOutputText(o jobs.OutputRef) string {
	s := o.Asset
	if o.Kind != "" {
		s += " (" + o.Kind + ")"
	}
	if o.Root != "" {
		s += " under " + o.Root
	}
	return s
}
