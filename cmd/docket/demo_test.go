package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/integration/pgtest"
)

// requireClosingTable checks the demo's closing table for n orders of the
// sample rotation: of every ten, seven succeed (one on a retry), one fails,
// one dies after three attempts, one is left uncertain.
func requireClosingTable(t *testing.T, out string, n int) {
	t.Helper()
	tens := n / 10
	for _, row := range []struct {
		outcome        string
		jobs, attempts int
	}{
		{"succeeded", 7 * tens, 8 * tens},
		{"failed", tens, tens},
		{"dead", tens, 3 * tens},
		{"uncertain", tens, tens},
	} {
		require.Regexp(t, regexp.MustCompile(`(?m)^  `+row.outcome+`\s+`+strconv.Itoa(row.jobs)+`\s+`+strconv.Itoa(row.attempts)+`  \S`), out)
	}
	require.Contains(t, out, strconv.Itoa(7*tens)+" of "+strconv.Itoa(n)+" orders are invoiced in shop.orders")
}

// requireStory checks that the demo's output tells every part of its story
// after the invoices, on its clock's week of October 2026.
func requireStory(t *testing.T, out string) {
	t.Helper()
	// The prose, its wrapped lines joined again.
	flat := regexp.MustCompile(`\n\s+`).ReplaceAllString(out, " ")
	for _, re := range []string{
		// The plan: the charge fails, and the reservation is compensated.
		`(?m)^    reserve\s+stock\.reserve\s+compensated\s+\d+\s+stock\.release, job \d+$`,
		`(?m)^    charge\s+billing\.charge\s+failed\s+\d+\s+-$`,
		// The cases and their business-day deadlines: asked on Thursday,
		// due on Monday at the cut-off, in winter time.
		`(?m)^    \d+\s+document DOC-4711, meter 51238696781\s+\d+\s+document DOC-4711\s+Mon 26 Oct 17:00 CET$`,
		`(?m)^    \d+\s+document DOC-4712, meter 51238696782\s+\d+\s+document DOC-4712\s+Mon 26 Oct 17:00 CET$`,
		// The schedule's runs either side of the change, 02:00 twice.
		`(?m)^    Sun 25 Oct 01:00\s+0\s+2026-10-24T23:00:00Z\s+CEST$`,
		`(?m)^    Sun 25 Oct 02:00\s+0\s+2026-10-25T00:00:00Z\s+CEST$`,
		`(?m)^    Sun 25 Oct 02:00\s+1\s+2026-10-25T01:00:00Z\s+CET: 02:00 again, an hour later$`,
		`(?m)^    Sun 25 Oct 03:00\s+0\s+2026-10-25T02:00:00Z\s+CET$`,
		// How the two switches ended.
		`(?m)^    \d+\s+ACK-4711, Fri 23 Oct 10:15 CEST\s+met\s+approved by user:rita$`,
		`(?m)^    \d+\s+none\s+breached\s+chased \(job \d+\), escalated \(job \d+\)$`,
	} {
		require.Regexp(t, regexp.MustCompile(re), out)
	}
	for _, re := range []string{
		`Run \d+ is compensated\. The charge failed for good \(step charge failed: card declined by the issuer\)`,
		`Thu 22 Oct 10:00 CEST  user:pat asks to switch two meters to Stadtwerke Nord\. For each, svc:switch opens a case ` +
			`that owes an acknowledgement in 2 working days \(Europe/Berlin calendar, cut-off 17:00\)`,
		`Saturday and Sunday do not count, so the second is Monday, at 17:00`,
		// The acknowledgement, by its correlation key.
		`Fri 23 Oct 10:15 CEST  svc:inbox delivers ACK-4711 from supplier:stadtwerke-nord, filed under document DOC-4711 only\.`,
		`it satisfies case \d+'s wait \d+ \(now satisfied\)`,
		`it met obligation \d+ \(now met\) and opened approval task \d+, due Mon 26 Oct 17:00 CET`,
		// Four eyes: refused to the proposer, decided by a second principal.
		`Fri 23 Oct 11:00 CEST  user:pat, who holds task\.review but asked for the switch, claims task \d+: refused\. ` +
			`task\.claim task=\d+: excluded actor: user:pat may not claim task \d+: four eyes .*\[DK008\]`,
		`Fri 23 Oct 11:05 CEST  user:rita claims task \d+ for 30 minutes`,
		`Fri 23 Oct 11:12 CEST  user:rita decides approve: "Stadtwerke Nord confirmed the switch date, 1 November"`,
		`case \d+ now waits for the switch's confirmation \(wait \d+\), due Fri 30 Oct 17:00 CET`,
		// A run that waits for a second person's approval.
		`Fri 23 Oct 11:30 CEST  svc:orders starts run \d+, approve → refund: the approve step is no job but task \d+, due Sat 24 Oct 11:30 CEST\. ` +
			`The run is suspended`,
		`svc:orders, which started the run, approves its own refund: refused \(four eyes\) \[DK008\]`,
		`Fri 23 Oct 11:40 CEST  user:rita approves: .* Run \d+ is succeeded: \{"decision": "approve", "refunded": "A-1041"\}`,
		`Fri 23 Oct 10:20 CEST  svc:inbox delivers ACK-4721, filed under document DOC-4721: a typo for DOC-4712\. ` +
			`No case holds that key, so it is buffered \(message \d+\)`,
		`The dead-letter sweep gives up on ACK-4721, which no wait claimed within 3 days`,
		`Sat 24 Oct 23:30 CEST  svc:switch creates schedule \d+, meter-readings, "0 \* \* \* \*" in Europe/Berlin`,
		`"30 2 \* \* \*" at 2026-10-25T00:30:00Z \(fold 0\), then 2026-10-26T01:30:00Z`,
		// The deadline passes on the demo's clock, not before.
		`Mon 26 Oct 16:59 CET   the wait expiry and breach sweeps, run now: nothing is due yet`,
		`Mon 26 Oct 17:00 CET   run again: they expire 1 wait and breach 1 obligation, of case \d+\. ` +
			`The worker ran job \d+ switch\.chase, the wait's timeout, .* job \d+ switch\.escalate, the obligation's escalation`,
	} {
		require.Regexp(t, regexp.MustCompile(re), flat)
	}
	// Each part, with what reads it.
	for _, title := range []string{"1. invoices", "2. the plan", "3. the supplier switch", "4. the approval", "5. the schedule", "6. the deadline"} {
		require.Regexp(t, `(?m)^  `+regexp.QuoteMeta(title)+`.*\n    \$ docket .*\n`, out)
	}
	require.Regexp(t, `(?m)^    \$ psql "\$url" -c "SELECT \* FROM docket\.waits_waiting WHERE project = '[a-z0-9-]+'"$`, out)
}

// demoCommand is one line of the closing screen: a docket command line or
// a psql query.
type demoCommand struct {
	docket []string // the docket command's arguments
	sql    string   // the psql query
}

// demoCommands reads the closing screen's command lines, in order.
func demoCommands(t *testing.T, out string) []demoCommand {
	t.Helper()
	var cmds []demoCommand
	for _, m := range regexp.MustCompile(`(?m)^    \$ (docket|psql) (.*)$`).FindAllStringSubmatch(out, -1) {
		if m[1] == "psql" {
			q := regexp.MustCompile(`^"\$url" -c "(.*)"$`).FindStringSubmatch(m[2])
			require.NotNil(t, q, m[0])
			cmds = append(cmds, demoCommand{sql: q[1]})
			continue
		}
		cmds = append(cmds, demoCommand{docket: shellWords(t, m[2])})
	}
	return cmds
}

// shellWords splits a command line as a shell would one with words and
// double-quoted strings only.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	for _, m := range regexp.MustCompile(`"([^"]*)"|(\S+)`).FindAllStringSubmatch(line, -1) {
		if strings.HasPrefix(m[0], `"`) {
			words = append(words, m[1])
		} else {
			require.NotContains(t, m[2], `"`, line)
			words = append(words, m[2])
		}
	}
	return words
}

func TestDemoOnAGivenDatabase(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	env := dbEnv(url)
	env["USER"] = "ana"

	started := time.Now()
	r := docket(t, env, "demo")
	require.Equal(t, 0, r.code, r.stderr)
	require.Less(t, time.Since(started), time.Minute, "the demo tells its story in under a minute")
	require.Empty(t, r.stderr)
	require.Regexp(t, `(?m)^  project   demo, where each principal of the demo holds only what it needs:$`, r.stdout)
	require.Regexp(t, `(?m)^              user:ana\s+job\.reconcile case\.view schedule\.view\s+you: reads it all`, r.stdout)
	require.Contains(t, r.stdout, "clock     the demo's own: it starts at Thu 22 Oct 2026 09:00 CEST")
	// Not a terminal: the progress comes as lines, the last one final.
	require.Regexp(t, `placed 40/40  queued 0  claimed 0  succeeded 28  failed 4  dead 4  uncertain 4  exhausted 0\n`, r.stdout)
	require.NotContains(t, r.stdout, "\r")
	require.Contains(t, r.stdout, "All 40 invoice jobs settled in")
	requireClosingTable(t, r.stdout, 40)
	requireStory(t, r.stdout)
	require.Contains(t, r.stdout, `$ psql "$url" -c "SELECT state, count(*), sum(attempts) AS attempts FROM docket.jobs WHERE project = 'demo' GROUP BY state ORDER BY state"`)
	require.NotContains(t, r.stdout, "scratch")

	// psql is given the URL without its password.
	shown := regexp.MustCompile(`(?m)^  url=(\S+)$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, shown, r.stdout)
	require.Equal(t, strings.Replace(url, ":docket_test@", "@", 1), shown[1])
	require.NotContains(t, r.stdout, ":docket_test@")

	// Every command it lists works on what it left, as the demo's actor.
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	defer pool.Close()
	cmds := demoCommands(t, r.stdout)
	var ran, queried int
	for _, cmd := range cmds {
		if cmd.sql != "" {
			rows, err := pool.Query(t.Context(), cmd.sql)
			require.NoError(t, err, cmd.sql)
			n := 0
			for rows.Next() {
				n++
			}
			require.NoError(t, rows.Err(), cmd.sql)
			require.Positive(t, n, "%s reads nothing", cmd.sql)
			queried++
			continue
		}
		s := docket(t, env, cmd.docket...)
		require.Equal(t, 0, s.code, "%v: %s", cmd.docket, s.stderr)
		require.NotEmpty(t, s.stdout, cmd.docket)
		ran++
		switch strings.Join(cmd.docket[:2], " ") {
		case "job show":
			require.Regexp(t, `state\s+dead`, s.stdout)
		case "plan show":
			require.Contains(t, s.stdout, "compensated")
		case "task show":
			require.Regexp(t, `may not answer\s+.*user:pat.* \(four eyes\)`, s.stdout)
			require.Regexp(t, `decided\s+approve by user:rita`, s.stdout)
		case "dead-letter list":
			require.Regexp(t, `supplier:stadtwerke-nord\s+ACK-4721\s+document:DOC-4721`, s.stdout)
		case "schedule preview":
			require.Regexp(t, `2026-10-25 02:00\s+0\s+2026-10-25T00:00:00Z`, s.stdout)
			require.Regexp(t, `2026-10-25 02:00\s+1\s+2026-10-25T01:00:00Z`, s.stdout)
		}
	}
	require.GreaterOrEqual(t, ran, 10, "docket commands listed")
	require.GreaterOrEqual(t, queried, 12, "psql queries listed")
	cases := regexp.MustCompile(`(?m)^    \$ docket case show (\d+)$`).FindAllStringSubmatch(r.stdout, -1)
	require.Len(t, cases, 2)
	require.Regexp(t, `acknowledge\s+met\s+2026-10-26T16:00:00Z\s+2 working days`, docket(t, env, "cases", "show", cases[0][1]).stdout)
	require.Regexp(t, `acknowledge\s+breached\s+2026-10-26T16:00:00Z\s+2 working days`, docket(t, env, "cases", "show", cases[1][1]).stdout)
	require.Regexp(t, `confirmation\s+waiting`, docket(t, env, "waits", "demo").stdout)

	// Again on the same database: a project of its own.
	r = docket(t, env, "demo", "--orders", "10")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "project   demo-2,")
	requireClosingTable(t, r.stdout, 10)
	requireStory(t, r.stdout)
	require.Contains(t, r.stdout, "WHERE project = 'demo-2'")
}

// Without a URL the demo finds a server as the tests do and works in a
// scratch database it drops.
func TestDemoOnAScratchDatabase(t *testing.T) {
	t.Parallel()
	r := docket(t, map[string]string{"USER": "ana"}, "demo", "--orders", "20")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "finding a server as docket's tests do")
	requireClosingTable(t, r.stdout, 20)
	requireStory(t, r.stdout)
	require.Contains(t, r.stdout, "The scratch database is dropped now.")
}

func TestDemoUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"demo", "--orders", "0"},
		{"demo", "--orders", "1001"},
		{"demo", "--orders", "many"},
		{"demo", "now"},
	} {
		requireRefused(t, docket(t, nil, args...), exitUsage, args)
	}
}

// The demo's clock starts where it is told and only moves on; psql is
// shown a URL without its password, wherever the URL carries it.
func TestDemoClockAndURL(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 10, 22, 7, 0, 0, 0, time.UTC)
	clock := newDemoClock(start)
	require.WithinDuration(t, start, clock.Now(), time.Minute)
	later := start.Add(96 * time.Hour)
	clock.moveTo(later)
	require.False(t, clock.Now().Before(later))
	clock.moveTo(start)
	require.False(t, clock.Now().Before(later), "the clock never moves back")

	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable":                   "postgres://u@h:5432/db?sslmode=disable",
		"postgresql://u@h/db":                                             "postgresql://u@h/db",
		"postgres://u@h/db?password=secret&sslmode=require&sslpassword=x": "postgres://u@h/db?sslmode=require",
		"host=h user=u password=secret dbname=db":                         "host=h port=5432 user=u dbname=db",
	} {
		require.Equal(t, want, psqlURL(in), in)
	}
}
