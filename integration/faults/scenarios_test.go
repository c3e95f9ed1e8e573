//go:build unix

package faults

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/internal/pgserver"
)

// scenario is one fault and what the suite expects of the run it hits.
type scenario struct {
	name string
	// strict makes an uncertain job whose handler never started a failure:
	// the worker process survives the fault, so it knows what it claimed.
	strict bool
	// known makes any uncertain job a failure: the worker survives, each
	// handler runs to its end, and an outcome the worker could not record
	// before its lease expired it records late.
	known bool
	// prepare, when not nil, readies the database once the jobs are
	// enqueued, before a worker runs: for a fault that is there from the
	// start. It returns a report of what the fault did, for the end.
	prepare func(r *rig) (report func() string)
	// faults are the instants, as fractions of the workload succeeded, at
	// which to inject the fault.
	faults []float64
	// inject injects the i-th fault, the run's workers being r.children,
	// and returns when the fault has cleared.
	inject func(r *rig, i int, f form) injected
	// standby, when not empty, gives the cluster a streaming standby,
	// replicating "sync" or "async", for a failover to it.
	standby string
	// play, when not nil, runs the whole scenario instead, with a workload
	// of its own, into the report it is given.
	play func(t *testing.T, f form, res *result)
	// world, when not nil, makes the scenario's rig in place of a local
	// cluster and workers in child processes.
	world func(t *testing.T) *rig
}

// injected is what an inject did.
type injected struct {
	what string
	// effective is when the fault took hold: Postgres down, the worker
	// dead, the first connections ended. A success recorded before it was
	// under way before the fault.
	effective time.Time
	notes     []string // anything more for the report
}

// span is one fault injected into a run.
type span struct {
	what                      string
	since                     time.Time // the previous fault cleared, or the first worker started
	began, effective, cleared time.Time
}

// scenarios are the suite's scenarios in the form f.
func scenarios(f form) []scenario {
	mid := []float64{0.25}
	out := []scenario{
		{name: "restart", faults: mid, inject: restartPostgres},
		{name: "kill", faults: mid, inject: killWorker},
		{name: "terminate", strict: true, faults: mid, inject: terminateBackends},
		{name: "outage", strict: true, known: true, faults: mid, inject: outage},
		{name: "stop-in-outage", faults: mid, inject: stopInOutage},
		{name: "cut-writes", strict: true, prepare: cutWrites(
			"CREATE TRIGGER inside_cut AFTER INSERT ON faults.inside FOR EACH ROW")},
		{name: "cut-commit", strict: true, prepare: cutWrites(
			"CREATE CONSTRAINT TRIGGER inside_cut AFTER INSERT ON faults.inside DEFERRABLE INITIALLY DEFERRED FOR EACH ROW")},
		{name: "failover-sync", standby: "sync", faults: mid, inject: failover},
		{name: "failover-async", standby: "async", faults: mid, inject: failover},
		{name: "partition", strict: true, faults: mid, inject: partition, world: inContainers},
		{name: "plan-kill", play: planKill},
		{name: "batch-kill", play: batchKill},
		{name: "batch-100k", play: batch100k},
	}
	if f.long {
		out = append(out, scenario{name: "chaos", faults: []float64{1.0 / 6, 2.0 / 6, 3.0 / 6, 4.0 / 6, 5.0 / 6}, inject: chaos})
	}
	return out
}

// runLimit bounds the wait for a share of the workload to succeed.
const runLimit = 5 * time.Minute

// run runs the scenario on a cluster of its own, checks the outcome, logs
// its report and adds it to table, also when the test stops early.
func (sc scenario) run(t *testing.T, f form, table *summary) {
	res := result{name: sc.name, jobs: f.jobs}
	defer func() {
		res.skipped = t.Skipped()
		if t.Failed() && len(res.failed) == 0 {
			res.failed = []string{"stopped early: see the log"}
		}
		table.add(res)
	}()
	if sc.play != nil {
		sc.play(t, f, &res)
		return
	}
	world := sc.world
	if world == nil {
		world = func(t *testing.T) *rig { return newRigOf(t, sc.standby) }
	}
	r := world(t)
	ids := r.enqueue(f.jobs)
	var report func() string
	if sc.prepare != nil {
		report = sc.prepare(r)
	}
	r.startWorker()
	r.cleared = time.Now()
	var spans []span
	for i, share := range sc.faults {
		r.waitSucceeded(int(share*float64(len(ids))), runLimit)
		s := span{since: r.cleared, began: time.Now()}
		in := sc.inject(r, i, f)
		s.cleared = time.Now()
		s.effective = in.effective
		s.what = fmt.Sprintf("fault %d at %.0f%%, %s", i+1, share*100, in.what)
		spans = append(spans, s)
		res.notes = append(res.notes, in.notes...)
		r.cleared = s.cleared
	}
	r.settle()
	for _, c := range r.children {
		select {
		case <-c.Done():
		default:
			if _, _, ok := c.Terminate(stopBound); !ok {
				// What it had yet to log is lost: say so, so a check of
				// its logs that fails names the reason.
				r.killedAtEnd = append(r.killedAtEnd, c.Name)
				res.notes = append(res.notes, fmt.Sprintf("worker %s did not exit within %s of SIGTERM at the end: killed", c.Name, stopBound))
			}
		}
	}

	res.verdict = r.check(startedAny(r.children))
	successes := r.successes()
	for _, s := range spans {
		res.recoveries = append(res.recoveries, measure(s, successes))
	}
	if report != nil {
		res.notes = append(res.notes, report())
	}
	if sc.standby != "" {
		res.notes = append(res.notes, r.acknowledgedLost(sc.standby == "sync"))
	}
	res.events, res.warns = tally(r.children)
	for _, c := range r.children {
		if c.Races() > 0 {
			r.fail(checkRaces, "worker %s: the race detector reported %d data races:\n%s", c.Name, c.Races(), c.StderrTail())
		}
	}
	r.judge(res.verdict, len(ids), sc.strict)
	if sc.known {
		r.judgeKnown(res.verdict)
	}
	res.failed = r.failed
	res.log(t.Logf)
}

// failoverLag is how long the primary sends its standby nothing before it
// is lost: the replication link stalled, as over a slow network.
const failoverLag = time.Second

// failover stalls the primary's WAL sender for failoverLag (SIGSTOP), then
// kills the primary as the loss of its machine would (SIGKILL to the
// postmaster and to that sender, so nothing more reaches the standby), and
// promotes the standby, which the workers' multi-host URL then finds.
// Under synchronous replication the stall holds every commit unacknowledged;
// under asynchronous replication what the primary acknowledged in it is on
// the primary alone, and is lost with it.
func failover(r *rig, _ int, _ form) injected {
	ctx := r.t.Context()
	pc, err := pgx.Connect(ctx, r.cluster.AdminURL())
	require.NoError(r.t, err)
	var sender int
	require.NoError(r.t, pc.QueryRow(ctx, `SELECT pid FROM pg_stat_replication`).Scan(&sender))
	require.NoError(r.t, pc.Close(ctx))
	require.NoError(r.t, syscall.Kill(sender, syscall.SIGSTOP))
	time.Sleep(failoverLag) // the fault itself
	require.NoError(r.t, r.cluster.Kill())
	effective := time.Now()
	require.NoError(r.t, syscall.Kill(sender, syscall.SIGKILL))
	require.NoError(r.t, r.standby.Promote(ctx))
	return injected{what: fmt.Sprintf("the primary's WAL sender stalled %v, the primary killed (SIGKILL), the standby promoted in %v",
		failoverLag, time.Since(effective).Round(time.Millisecond)),
		effective: effective}
}

// acknowledgedLost checks the successes the job store acknowledged to a
// worker against what the promoted standby holds: with synchronous
// replication none may be missing; with asynchronous replication it reports
// how many were, and what became of their jobs.
func (r *rig) acknowledgedLost(synchronous bool) string {
	acked := ackedAny(r.children)
	ids := make([]string, len(acked))
	for i, id := range acked {
		ids[i] = strconv.FormatInt(id, 10)
	}
	lost := r.strings(r.t.Context(), fmt.Sprintf(`
		SELECT format('job %%s %%s after %%s attempts', j.id, j.state, j.attempts)
		FROM docket.jobs j WHERE j.id = ANY ('{%s}'::bigint[]) AND j.state <> 'succeeded' ORDER BY j.id`,
		strings.Join(ids, ",")))
	if synchronous && len(lost) > 0 {
		r.fail(checkAcked, "%d successes the job store acknowledged are not succeeded after the failover: %s",
			len(lost), strings.Join(lost[:min(examples, len(lost))], "; "))
	}
	byState := map[string]int{}
	for _, l := range lost {
		f := strings.Fields(l)
		byState[f[2]]++
	}
	return fmt.Sprintf("acknowledged successes %d, missing after the failover %d %v %v", len(acked), len(lost), byState,
		lost[:min(examples, len(lost))])
}

// restartPostgres crashes Postgres with an immediate shutdown and starts it
// again on the same data directory and port at once.
func restartPostgres(r *rig, _ int, _ form) injected {
	r.t.Helper()
	ctx := r.t.Context()
	require.NoError(r.t, r.cluster.Stop(ctx, pgserver.ImmediateShutdown))
	down := time.Now()
	require.NoError(r.t, r.cluster.Start(ctx))
	return injected{what: "Postgres: immediate shutdown, started again", effective: down}
}

// killWorker SIGKILLs the running worker process and starts a new one.
func killWorker(r *rig, _ int, _ form) injected {
	r.t.Helper()
	victim := r.children[len(r.children)-1]
	victim.Kill()
	dead := time.Now()
	next := r.startWorker()
	return injected{what: fmt.Sprintf("worker %s SIGKILLed, %s started", victim.Name, next.Name), effective: dead}
}

// terminateBackends ends every connection of app's login with
// pg_terminate_backend, every 250 ms for 5 s.
func terminateBackends(r *rig, _ int, _ form) injected {
	r.t.Helper()
	const every, lasting = 250 * time.Millisecond, 5 * time.Second
	var first time.Time
	total, rounds := 0, 0
	for end := time.Now().Add(lasting); time.Now().Before(end); time.Sleep(every) {
		var n int
		require.NoError(r.t, r.owner.QueryRow(r.t.Context(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
			FROM pg_stat_activity WHERE usename = $1`, r.login.Role).Scan(&n))
		if rounds == 0 {
			first = time.Now()
		}
		total += n
		rounds++
	}
	return injected{what: fmt.Sprintf("%d backends of the worker ended in %d rounds over %v", total, rounds, lasting), effective: first}
}

// outage stops Postgres (fast shutdown) for the form's outage, then starts
// it again.
func outage(r *rig, _ int, f form) injected {
	r.t.Helper()
	ctx := r.t.Context()
	require.NoError(r.t, r.cluster.Stop(ctx, pgserver.FastShutdown))
	down := time.Now()
	time.Sleep(f.outage) // the outage itself
	require.NoError(r.t, r.cluster.Start(ctx))
	return injected{what: fmt.Sprintf("Postgres stopped (fast shutdown) for %v", f.outage), effective: down}
}

// stopInOutage stops Postgres, asks the worker to stop once it has seen the
// outage for a second, and checks that it exits within stopBound; Postgres
// returns after the outage or once the worker has exited, whichever is
// later, and a new worker runs the rest.
func stopInOutage(r *rig, _ int, f form) injected {
	r.t.Helper()
	ctx := r.t.Context()
	require.NoError(r.t, r.cluster.Stop(ctx, pgserver.FastShutdown))
	down := time.Now()
	time.Sleep(time.Second) // the worker meets the outage
	victim := r.children[len(r.children)-1]
	took, said, ok := victim.Terminate(stopBound)
	if !ok {
		r.fail(checkStopBound, "worker %s did not exit within %v of SIGTERM; killed it:\n%s", victim.Name, stopBound, victim.StderrTail())
	}
	if rest := f.outage - time.Since(down); rest > 0 {
		time.Sleep(rest) // the rest of the outage
	}
	outage := time.Since(down)
	require.NoError(r.t, r.cluster.Start(ctx))
	next := r.startWorker()
	return injected{
		what: fmt.Sprintf("Postgres stopped (fast shutdown) for %v, worker %s sent SIGTERM after 1 s, %s started after",
			outage.Round(time.Millisecond), victim.Name, next.Name),
		effective: down,
		notes: []string{fmt.Sprintf("stop during the outage: %s exited %v after SIGTERM (bound %v); it said %q",
			victim.Name, took.Round(time.Millisecond), stopBound, said.Line)},
	}
}

// chaos alternates an immediate restart of Postgres (even faults) and a
// SIGKILL of the worker (odd ones).
func chaos(r *rig, i int, f form) injected {
	if i%2 == 0 {
		return restartPostgres(r, i, f)
	}
	return killWorker(r, i, f)
}

// cutWrites returns a prepare that cuts, once each, the connection of every
// job whose id is a multiple of cutEvery inside its completion transaction:
// a trigger on the completion's row in faults.inside, made by create,
// records in a session of its own (so that the record outlives the cut)
// that it fired, then ends its own backend. A constraint trigger
// DEFERRABLE INITIALLY DEFERRED runs at COMMIT: the cut is then in the commit
// itself. It skips the test if the dblink extension is not installed.
func cutWrites(create string) func(r *rig) func() string {
	return func(r *rig) func() string {
		r.t.Helper()
		ctx := r.t.Context()
		var available bool
		require.NoError(r.t, r.owner.QueryRow(ctx,
			"SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'dblink')").Scan(&available))
		if !available {
			r.t.Skip("the cut scenarios record their cuts through the dblink extension, which is not installed (postgresql-contrib)")
		}
		_, err := r.owner.Exec(ctx, `
			CREATE EXTENSION dblink SCHEMA faults;
			-- Cuts the connection of a job planned in faults.cuts, once: the
			-- record that it fired is committed by a session of its own, so
			-- the next try of the same completion goes through.
			CREATE FUNCTION faults.cut() RETURNS trigger
			LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
			BEGIN
			    IF EXISTS (SELECT 1 FROM faults.cuts WHERE job_id = NEW.job_id AND fired_at IS NULL) THEN
			        PERFORM faults.dblink_exec(
			            format('host=127.0.0.1 port=%s dbname=%s user=%s', current_setting('port'), current_database(), current_user),
			            format('UPDATE faults.cuts SET fired_at = clock_timestamp() WHERE job_id = %s', NEW.job_id));
			        PERFORM pg_terminate_backend(pg_backend_pid());
			    END IF;
			    RETURN NULL;
			END
			$$;
			`+create+` EXECUTE FUNCTION faults.cut();`)
		require.NoError(r.t, err)
		_, err = r.owner.Exec(ctx, "INSERT INTO faults.cuts (job_id) SELECT id FROM docket.jobs WHERE id % $1 = 0", cutEvery)
		require.NoError(r.t, err)
		return r.cutsFired
	}
}

// cutsFired reports how many of the planned cuts fired. It fails the test
// if none did, and for each cut completion no worker warned of: a held
// outcome retried is logged at WARN.
func (r *rig) cutsFired() string {
	r.t.Helper()
	rows, err := r.owner.Query(r.t.Context(), "SELECT job_id, fired_at IS NOT NULL FROM faults.cuts ORDER BY job_id")
	require.NoError(r.t, err)
	warned := warnedAny(r.children)
	var planned, fired int
	var silent []int64
	var id int64
	var cut bool
	_, err = pgx.ForEachRow(rows, []any{&id, &cut}, func() error {
		planned++
		if cut {
			fired++
			if !warned[id] {
				silent = append(silent, id)
			}
		}
		return nil
	})
	require.NoError(r.t, err)
	if fired == 0 {
		r.fail(checkCut, "no completion was cut: %d planned", planned)
	}
	if len(silent) > 0 {
		var states []string
		require.NoError(r.t, r.owner.QueryRow(r.t.Context(),
			"SELECT coalesce(array_agg(id || ' ' || state ORDER BY id), '{}') FROM docket.jobs WHERE id = ANY($1)",
			silent[:min(examples, len(silent))]).Scan(&states))
		r.fail(checkWarned, "%d of the %d cut completions were tried again with no warning naming their job, e.g. %v (workers killed at the end, whose last lines are lost: %v)",
			len(silent), fired, states, r.killedAtEnd)
	}
	return fmt.Sprintf("completion connections cut: %d of %d planned; %d retried without a warning", fired, planned, len(silent))
}
