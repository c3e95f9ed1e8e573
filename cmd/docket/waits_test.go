package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/internal/testkit"
)

// The inbox delivers messages to acme's cases; the sweeper dead-letters those
// nobody claims.
const (
	inbox   access.Actor = "svc:inbox"
	sweeper access.Actor = "svc:sweeper"
)

func TestWaitsAndDeadLettersCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := setup(t,
		testkit.Grants(app, project, access.CaseAdmit, access.JobCreate),
		testkit.Grants(inbox, project, access.MessageDeliver, access.JobCreate),
		testkit.Grants(sweeper, project, access.CaseSweep),
		testkit.Grants(vic, project, access.CaseView))

	// Seeded three hours ago, so the time left and the ages read from the
	// system clock are known to a few seconds.
	base := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Second)
	c.Clock.Set(base)
	appCases, err := cases.NewClient(c.Pool, cases.Config{Actor: app, Clock: c.Clock})
	require.NoError(t, err)
	inboxCases, err := cases.NewClient(c.Pool, cases.Config{Actor: inbox, Clock: c.Clock})
	require.NoError(t, err)
	doc := func(v string) cases.Key { return cases.Key{Namespace: "document", Value: v} }
	admit := func(v string) cases.Case {
		a, err := appCases.Admit(ctx, cases.Admission{Project: project, Kind: "supplier.switch", Keys: []cases.Key{doc(v)}})
		require.NoError(t, err)
		return a.Case
	}
	await := func(c cases.Case, name string, deadline time.Duration, timeout string, keys ...cases.Key) cases.Awaited {
		s := cases.WaitSpec{Name: name, Keys: keys, Deadline: base.Add(deadline),
			OnArrival: cases.Continuation{Kind: "supplier.reply", Payload: json.RawMessage(`{"step":"confirm-secret"}`)}}
		if timeout != "" {
			s.OnTimeout = &cases.Continuation{Kind: timeout}
		}
		a, err := appCases.Await(ctx, c.ID, s)
		require.NoError(t, err)
		return a
	}
	deliver := func(to cases.Case, id string, keys ...cases.Key) cases.Delivered {
		d := cases.Delivery{Project: project, Producer: "supplier:4711", MessageID: id, Keys: keys,
			Payload: json.RawMessage(`{"iban":"hunter2"}`)}
		var got cases.Delivered
		var err error
		if to.ID != 0 {
			got, err = inboxCases.DeliverTo(ctx, to.ID, d)
		} else {
			got, err = inboxCases.Deliver(ctx, d)
		}
		require.NoError(t, err)
		return got
	}

	// Case one waits for a reply (51 hours from base: two days left) and an
	// ack (two hours from base: an hour overdue, not yet swept).
	one := admit("DOC-1")
	reply := await(one, "supplier-reply", 51*time.Hour, "supplier.chase", doc("DOC-1"), cases.Key{Namespace: "kind", Value: "confirmation"})
	ack := await(one, "ack", 2*time.Hour, "", doc("DOC-1"))
	// Case two waits for a confirmation, which came, and for a reply.
	two := admit("DOC-2")
	confirm := await(two, "confirmation", 24*time.Hour, "", doc("DOC-2"))
	got := deliver(cases.Case{}, "m-confirm", doc("DOC-2"))
	require.Equal(t, confirm.ID, got.ConsumedBy)
	later := await(two, "later", 30*time.Hour, "supplier.chase", doc("DOC-2"))
	// A message addressed to case three, which closes without it; a message
	// nobody claims, dead-lettered by the sweep after its horizon.
	three := admit("DOC-3")
	addressed := deliver(three, "m-addressed", doc("DOC-3"))
	_, err = appCases.Close(ctx, three.ID)
	require.NoError(t, err)
	lost := deliver(cases.Case{}, "m-lost", doc("DOC-404"))
	_, err = c.Pool.Exec(ctx, `SELECT docket.message_dead_letter_due(100, interval '1 minute', $1, $2)`, string(sweeper), base.Add(time.Hour))
	require.NoError(t, err)

	// waits: the waiting waits of acme, soonest deadline first.
	r := c.as(t, vic, "waits", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^ID\s+CASE\s+NAME\s+STATUS\s+KEYS\s+DEADLINE\s+LEFT\s+ON ARRIVAL\s+ON TIMEOUT\n`, r.stdout)
	rows := []string{
		fmt.Sprintf(`(?m)^%d\s+%d\s+ack\s+waiting\s+document:DOC-1\s+%s\s+overdue 1h0m\d+s\s+supplier.reply\s+-$`,
			ack.ID, one.ID, regexp.QuoteMeta(base.Add(2*time.Hour).Format(time.RFC3339))),
		fmt.Sprintf(`(?m)^%d\s+%d\s+later\s+waiting\s+document:DOC-2\s+%s\s+(1d02h59m|1d03h00m)\s+supplier.reply\s+supplier.chase$`,
			later.ID, two.ID, regexp.QuoteMeta(base.Add(30*time.Hour).Format(time.RFC3339))),
		fmt.Sprintf(`(?m)^%d\s+%d\s+supplier-reply\s+waiting\s+document:DOC-1,kind:confirmation\s+%s\s+(1d23h59m|2d00h00m)\s+supplier.reply\s+supplier.chase$`,
			reply.ID, one.ID, regexp.QuoteMeta(base.Add(51*time.Hour).Format(time.RFC3339))),
	}
	requireRowsInOrder(t, r.stdout, rows...)
	require.Equal(t, 4, strings.Count(r.stdout, "\n"), r.stdout)
	require.NotContains(t, r.stdout, "satisfied")
	require.NotContains(t, r.stdout, "secret")

	r = c.as(t, app, "waits", "acme", "--limit", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	require.Regexp(t, rows[0], r.stdout)

	// --case: every wait of the case, whatever its status; no time left for
	// what is over. Flags go before or after the project.
	for _, args := range [][]string{
		{"waits", "--case", fmt.Sprint(two.ID), "acme"},
		{"waits", "acme", "--case", fmt.Sprint(two.ID)},
	} {
		r = c.as(t, vic, args...)
		require.Equal(t, 0, r.code, r.stderr)
		requireRowsInOrder(t, r.stdout,
			fmt.Sprintf(`(?m)^%d\s+%d\s+confirmation\s+satisfied\s+document:DOC-2\s+\S+\s+-\s+supplier.reply\s+-$`, confirm.ID, two.ID),
			rows[1])
		require.Equal(t, 3, strings.Count(r.stdout, "\n"), r.stdout)
	}
	r = c.as(t, vic, "waits", "--case", fmt.Sprint(two.ID), "--limit", "1", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	require.Contains(t, r.stdout, "confirmation")
	// A case closed: its waits were withdrawn with it; none was left.
	r = c.as(t, vic, "waits", "--case", fmt.Sprint(three.ID), "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), r.stdout)

	// Who may not read the project's cases sees no waits; a case asked for
	// under another project is not there.
	for _, args := range [][]string{
		{"--as", "user:sam", "waits", "acme"},
		{"--as", "svc:inbox", "waits", "acme"},
		{"--as", "user:sam", "waits", "--case", fmt.Sprint(one.ID), "acme"},
		{"--as", "user:vic", "waits", "--case", fmt.Sprint(one.ID), "other"},
		{"--as", "user:vic", "waits", "--case", "999999", "acme"},
	} {
		r = c.run(t, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, 1, strings.Count(r.stdout, "\n"), "%v: %s", args, r.stdout)
	}

	// dead-letters: newest first, with who sent each, its keys, its
	// addressee, its age and why; never the payload.
	r = c.as(t, vic, "dead-letters", "acme")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^ID\s+PRODUCER\s+MESSAGE ID\s+KEYS\s+ADDRESSEE\s+AGE\s+REASON\n`, r.stdout)
	dead := []string{
		fmt.Sprintf(`(?m)^%d\s+supplier:4711\s+m-lost\s+document:DOC-404\s+-\s+3h0m\d+s\s+no wait claimed it within the horizon of 00:01:00$`,
			lost.ID),
		fmt.Sprintf(`(?m)^%d\s+supplier:4711\s+m-addressed\s+document:DOC-3\s+%d\s+3h0m\d+s\s+addressed to case %d, which closed without consuming it$`,
			addressed.ID, three.ID, three.ID),
	}
	requireRowsInOrder(t, r.stdout, dead...)
	require.Equal(t, 3, strings.Count(r.stdout, "\n"), r.stdout)
	require.NotContains(t, r.stdout, "hunter2")
	require.NotContains(t, r.stdout, "iban")

	for _, as := range []access.Actor{inbox, app} {
		r = c.as(t, as, "dead-letters", "--limit", "1", "acme")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
		require.Regexp(t, dead[0], r.stdout)
	}
	for _, args := range [][]string{
		{"--as", "user:sam", "dead-letters", "acme"},
		{"--as", "svc:sweeper", "dead-letters", "acme"},
		{"--as", "user:vic", "dead-letters", "other"},
	} {
		r = c.run(t, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, 1, strings.Count(r.stdout, "\n"), "%v: %s", args, r.stdout)
	}

	r = c.run(t, "help")
	require.Contains(t, r.stdout, "\n  wait list PROJECT [--case ID] [--limit N] [-o json]\n")
	require.Contains(t, r.stdout, "\n  dead-letter list PROJECT [--limit N] [-o json]\n")

	// A wrong command line exits 2 with one line, before connecting.
	for _, args := range [][]string{
		{"waits"},
		{"waits", ""},
		{"waits", "acme", "other"},
		{"waits", "--limit", "0", "acme"},
		{"waits", "--limit", "1001", "acme"},
		{"waits", "--limit", "-5", "acme"},
		{"waits", "--limit", "x", "acme"},
		{"waits", "acme", "--limit", "0"},
		{"waits", "--case", "0", "acme"},
		{"waits", "--case", "-1", "acme"},
		{"waits", "--case", "x", "acme"},
		{"waits", "--case", "acme"},
		{"waits", "--frob", "acme"},
		{"dead-letters"},
		{"dead-letters", ""},
		{"dead-letters", "acme", "other"},
		{"dead-letters", "--limit", "0", "acme"},
		{"dead-letters", "--limit", "1001", "acme"},
		{"dead-letters", "acme", "--limit", "many"},
		{"dead-letters", "--case", "1", "acme"},
	} {
		r = docket(t, unreachable, args...)
		requireRefused(t, r, exitUsage, args)
		require.True(t, strings.HasPrefix(r.stderr, "docket "+plurals[args[0]]+" list: "), "%v: %q", args, r.stderr)
	}
}

// requireRowsInOrder requires each pattern to match a line of out, each
// further down than the one before.
func requireRowsInOrder(t *testing.T, out string, patterns ...string) {
	t.Helper()
	at := -1
	for _, p := range patterns {
		loc := regexp.MustCompile(p).FindStringIndex(out)
		require.NotNil(t, loc, "%s\nin\n%s", p, out)
		require.Greater(t, loc[0], at, "%s out of order in\n%s", p, out)
		at = loc[0]
	}
}
