package main

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"
)

// closeDemo prints the closing screen: for each part of the demo, the docket
// commands and the psql queries that read it, with the demo's ids.
func (c *cli) closeDemo(project string, inv invoiceIDs, s *story, scratch bool) {
	q := quoteLiteral(project)
	a, b := s.switches[0], s.switches[1]
	where := "the docket commands on the database the demo used (from --database-url or " +
		"DOCKET_DATABASE_URL, as for the demo), psql on it as url, here without its password"
	if scratch {
		where = "the docket commands and psql on the database the demo used, url (here without its " +
			"password), had it been kept"
	}
	fmt.Fprintf(c.stdout, "\n%s:\n\n  url=%s\n",
		strings.Join(wrap("What an operator runs to read each part: "+where, demoWidth), "\n"), psqlURL(c.url))
	parts := []struct {
		title string
		lines []string
	}{
		{"1. invoices: jobs by state, a job's hash-chained history, the orders beside their jobs", []string{
			"docket job list --state uncertain " + project,
			fmt.Sprintf("docket job show %d", inv.history()),
			fmt.Sprintf(`psql "$url" -c "SELECT state, count(*), sum(attempts) AS attempts FROM docket.jobs WHERE project = %s GROUP BY state ORDER BY state"`, q),
			fmt.Sprintf(`psql "$url" -c "SELECT id, kind, attempts, diagnostic FROM docket.jobs_dead WHERE project = %s"`, q),
			fmt.Sprintf(`psql "$url" -c "SELECT seq, from_state, to_state, actor, attempt FROM docket.job_events WHERE job_id = %d ORDER BY seq"`, inv.history()),
			fmt.Sprintf(`psql "$url" -c "SELECT o.id, o.customer, o.status, j.state, j.attempts FROM shop.orders o JOIN docket.jobs j ON j.id = o.invoice_job WHERE j.project = %s ORDER BY o.id"`, q),
		}},
		{"2. the plan: its steps, their jobs and the compensation", []string{
			fmt.Sprintf("docket plan show %d", s.run.ID),
			fmt.Sprintf(`psql "$url" -c "SELECT ready_seq, step_id, kind, state, job_id, compensation_job_id FROM docket.run_steps WHERE run_id = %d ORDER BY ready_seq"`, s.run.ID),
		}},
		{"3. the supplier switch: the cases, their keys, obligations, waits and the acknowledgement", []string{
			fmt.Sprintf("docket case show %d", a.caseID),
			"docket wait list " + project,
			fmt.Sprintf(`psql "$url" -c "SELECT * FROM docket.waits_waiting WHERE project = %s"`, q),
			fmt.Sprintf(`psql "$url" -c "SELECT id, case_id, name, state, due_at, rule FROM docket.obligations WHERE case_id IN (%d, %d) ORDER BY id"`, a.caseID, b.caseID),
			fmt.Sprintf(`psql "$url" -c "SELECT id, producer, message_id, keys, status, consumed_by FROM docket.messages WHERE project = %s"`, q),
		}},
		{"4. the approval: who may not answer it, its claim, its decision", []string{
			fmt.Sprintf("docket task show %d", a.task.ID),
			fmt.Sprintf(`psql "$url" -c "SELECT id, status, proposer, excluded, decision, decided_by FROM docket.tasks WHERE id = %d"`, a.task.ID),
			fmt.Sprintf(`psql "$url" -c "SELECT what, actor, at FROM docket.task_events WHERE task_id = %d ORDER BY id"`, a.task.ID),
		}},
		{"5. the schedule: its next runs, with their fold", []string{
			fmt.Sprintf("docket schedule preview --count %d %d", demoPreview, s.schedule.ID),
			"docket schedule list " + project,
			fmt.Sprintf(`psql "$url" -c "SELECT id, name, cron, zone, status, next_due_at FROM docket.schedules WHERE id = %d"`, s.schedule.ID),
		}},
		{"6. the deadline: the expired wait, the breached obligation, their jobs, the dead letter", []string{
			fmt.Sprintf("docket case show %d", b.caseID),
			"docket dead-letter list " + project,
			fmt.Sprintf(`psql "$url" -c "SELECT id, name, status, deadline, continuation_job_id FROM docket.waits WHERE case_id = %d ORDER BY id"`, b.caseID),
			fmt.Sprintf(`psql "$url" -c "SELECT id, kind, state, idempotency_key FROM docket.jobs WHERE case_id = %d ORDER BY id"`, b.caseID),
			fmt.Sprintf(`psql "$url" -c "SELECT producer, message_id, keys, reason FROM docket.messages_dead WHERE project = %s"`, q),
		}},
	}
	if inv.uncertain > 0 {
		parts[0].lines = append(parts[0].lines[:2:2], append([]string{
			fmt.Sprintf(`docket job reconcile --note "the gateway has the charge" %d succeeded`, inv.uncertain)}, parts[0].lines[2:]...)...)
	}
	for _, p := range parts {
		fmt.Fprintf(c.stdout, "\n  %s\n", p.title)
		for _, l := range p.lines {
			fmt.Fprintf(c.stdout, "    $ %s\n", l)
		}
	}
	if scratch {
		fmt.Fprintln(c.stdout, "\nThe scratch database is dropped now. To keep what the demo wrote and run the above,\n"+
			"give it a database: DOCKET_DATABASE_URL=URL make demo, or docket --database-url URL demo.")
	}
}

// psqlURL is u without its password, for a psql command line: psql asks for
// it, or takes it from PGPASSWORD or ~/.pgpass.
func psqlURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "postgres" && p.Scheme != "postgresql") {
		// A key=value connection string: the same, without the password.
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			return "(an unparsable URL)"
		}
		cc := cfg.ConnConfig
		return fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cc.Host, cc.Port, cc.User, cc.Database)
	}
	if p.User != nil {
		p.User = url.User(p.User.Username())
	}
	qs := p.Query()
	for _, k := range []string{"password", "sslpassword"} {
		qs.Del(k)
	}
	p.RawQuery = qs.Encode()
	return p.String()
}

// table prints rows aligned in columns, each line indented, without
// trailing blanks.
type table struct {
	w      io.Writer
	buf    bytes.Buffer
	tw     *tabwriter.Writer
	indent string
}

// newTable starts a table on w; header, when given, is its first row.
func newTable(w io.Writer, indent string, header ...string) *table {
	t := &table{w: w, indent: indent}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() {
	_ = t.tw.Flush()
	for _, l := range strings.SplitAfter(t.buf.String(), "\n") {
		if l == "" {
			continue
		}
		fmt.Fprintln(t.w, t.indent+strings.TrimRight(l, " \n"))
	}
	t.buf.Reset()
}
