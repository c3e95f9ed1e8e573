// Command bench measures docket's plan runs against DBOS Transact for Go on
// one PostgreSQL server: a 3-step chain (W1), a fan-out of 8 leaves and a
// join (W2), and one 3-step run at a time (W3). It starts a private cluster
// with pg_stat_statements, gives each side of each round a fresh database
// (the side that goes first alternating from round to round), and reports
// runs/s, steps/s, server CPU per run and WAL per run. See docs/plans.md.
//
//	cd bench && go run . [-w1 2000] [-w2 500] [-w3 200] [-rounds 2] [-sides docket,dbos]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/internal/pgserver"
)

var (
	w1N          = flag.Int("w1", 2000, "W1: runs of a 3-step chain")
	w2N          = flag.Int("w2", 500, "W2: runs of root -> 8 leaves -> join")
	w3N          = flag.Int("w3", 200, "W3: 3-step runs one at a time")
	rounds       = flag.Int("rounds", 2, "rounds, each side once in each, the first side alternating")
	sides        = flag.String("sides", "docket,dbos", "sides to run, in order")
	only         = flag.String("only", "w1,w2,w3", "workloads to run")
	profile      = flag.String("profile", "", "write each workload's top statements (pg_stat_statements, track=all), waits, functions and WAL by relation, of each side, to this file")
	topN         = flag.Int("top", 30, "statements in the profile")
	extra        = flag.String("set", "", "more server settings, name=value, separated by ;")
	handlers     = flag.Int("handlers", 100, "docket worker handlers / DBOS queue worker concurrency")
	batchMax     = flag.Int("batch", 0, "docket: the most jobs a batch holds (worker.Batching.Max); 0 for the worker's default")
	pollEvery    = flag.Duration("poll", 0, "docket: how often the worker looks for due jobs without a notification (worker.Config.PollInterval, 10ms .. 1h); 0 for the worker's default")
	afterMigrate = flag.String("sql", "", "docket: SQL the owner runs after the migration, for attribution only (disable a trigger, drop a constraint)")
)

// result is one workload's numbers on one side.
type result struct {
	Side, Workload string
	Runs, Steps    int
	Elapsed        time.Duration
	CPU            time.Duration // server processes' user+system time (procfs)
	ExecTime       time.Duration // pg_stat_statements top-level total_exec_time
	WAL            int64
	P50, P99       time.Duration
}

func main() {
	flag.Parse()
	ctx := context.Background()
	settings := []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.max=10000"}
	if *profile != "" {
		settings = append(settings, "pg_stat_statements.track=all", "pg_stat_statements.track_planning=on", "track_functions=all")
	}
	if *extra != "" {
		settings = append(settings, strings.Split(*extra, ";")...)
	}
	srv, err := pgserver.StartLocalWith(ctx, pgserver.LocalConfig{MaxConnections: 400, Settings: settings})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close(ctx)
	var prof *os.File
	if *profile != "" {
		if prof, err = os.Create(*profile); err != nil {
			log.Fatal(err)
		}
		defer prof.Close()
	}
	var all []result
	want := map[string]bool{}
	for _, w := range strings.Split(*only, ",") {
		want[w] = true
	}
	for r := 1; r <= *rounds; r++ {
		order := strings.Split(*sides, ",")
		if r%2 == 0 {
			// Every other round the other side goes first, so that neither
			// always runs on the host as the other left it.
			slices.Reverse(order)
		}
		for _, side := range order {
			name := pgserver.RandomName("bench_" + side)
			if err := srv.CreateDatabase(ctx, name, "template0"); err != nil {
				log.Fatal(err)
			}
			url, err := srv.URL(name)
			if err != nil {
				log.Fatal(err)
			}
			m, err := newMeter(ctx, url)
			if err != nil {
				log.Fatal(err)
			}
			var res []result
			switch side {
			case "docket":
				res, err = runDocket(ctx, url, m, want, prof)
			case "dbos":
				res, err = runDBOS(ctx, url, m, want, prof)
			default:
				err = fmt.Errorf("no side %q", side)
			}
			m.close()
			if err != nil {
				log.Fatalf("%s: %v", side, err)
			}
			for _, x := range res {
				printResult(r, x)
			}
			all = append(all, res...)
			_ = srv.DropDatabase(ctx, name)
		}
	}
	fmt.Println()
	fmt.Println("| round | side | workload | runs | runs/s | steps/s | server CPU/run | exec time/run | WAL/run | p50 | p99 |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for i, x := range all {
		fmt.Println(row(1+i/max(1, len(all) / *rounds), x))
	}
}

func printResult(round int, x result) { fmt.Fprintln(os.Stderr, row(round, x)) }

func row(round int, x result) string {
	secs := x.Elapsed.Seconds()
	p50, p99 := "", ""
	if x.P50 > 0 {
		p50, p99 = ms(x.P50), ms(x.P99)
	}
	return fmt.Sprintf("| %d | %s | %s | %d | %.0f | %.0f | %s | %s | %.1f KB | %s | %s |",
		round, x.Side, x.Workload, x.Runs, float64(x.Runs)/secs, float64(x.Steps)/secs,
		ms(x.CPU/time.Duration(x.Runs)), ms(x.ExecTime/time.Duration(x.Runs)),
		float64(x.WAL)/float64(x.Runs)/1024, p50, p99)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// percentiles returns the p50 and p99 of ds.
func percentiles(ds []time.Duration) (time.Duration, time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)]
}

// meter reads the server's counters before and after a workload, as the
// cluster's superuser on the workload's database.
type meter struct {
	pool       *pgxpool.Pool
	postmaster int
}

func newMeter(ctx context.Context, url string) (*meter, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	m := &meter{pool: pool}
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return nil, err
	}
	var pid int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return nil, err
	}
	if m.postmaster, err = parentPID(pid); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *meter) close() { m.pool.Close() }

type reading struct {
	stop func() map[string]int
	at   time.Time
	cpu  time.Duration
	lsn  string
}

func (m *meter) start(ctx context.Context) (reading, error) {
	if _, err := m.pool.Exec(ctx, "SELECT pg_stat_statements_reset(), pg_stat_reset()"); err != nil {
		return reading{}, err
	}
	r, err := m.read(ctx)
	if *profile != "" {
		r.stop = m.sample(ctx)
	}
	return r, err
}

// sample counts, every 5 ms until stopped, what the database's active
// backends wait on (wait_event_type:wait_event, or CPU) and in which
// statement.
func (m *meter) sample(ctx context.Context) func() map[string]int {
	counts := map[string]int{}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
			rows, err := m.pool.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'),
				regexp_replace(left(query, 40), '\s+', ' ', 'g')
				FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()`)
			if err != nil {
				continue
			}
			for rows.Next() {
				var w, q string
				if rows.Scan(&w, &q) == nil {
					counts[w+" | "+q]++
				}
			}
			rows.Close()
		}
	}()
	return func() map[string]int { close(quit); <-done; return counts }
}

func (m *meter) read(ctx context.Context) (reading, error) {
	var r reading
	if err := m.pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&r.lsn); err != nil {
		return r, err
	}
	cpu, err := clusterCPU(m.postmaster)
	r.cpu, r.at = cpu, time.Now()
	return r, err
}

// finish fills x's elapsed time, CPU, exec time and WAL since before.
func (m *meter) finish(ctx context.Context, before reading, x *result, prof *os.File) error {
	var waits map[string]int
	if before.stop != nil {
		waits = before.stop()
	}
	after, err := m.read(ctx)
	if err != nil {
		return err
	}
	x.Elapsed, x.CPU = after.at.Sub(before.at), after.cpu-before.cpu
	if err := m.pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", after.lsn, before.lsn).Scan(&x.WAL); err != nil {
		return err
	}
	var exec float64
	if err := m.pool.QueryRow(ctx, `SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements
		WHERE toplevel AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&exec); err != nil {
		return err
	}
	x.ExecTime = time.Duration(exec * 1e6)
	if prof != nil {
		if err := m.profile(ctx, x, prof); err != nil {
			return err
		}
		writeWaits(prof, waits)
		if err := m.functions(ctx, x, prof); err != nil {
			return err
		}
		if err := m.walByRelation(ctx, before.lsn, after.lsn, x, prof); err != nil {
			return err
		}
		return m.tables(ctx, prof)
	}
	return nil
}

// walByRelation writes the WAL written between two positions by the
// relation its records touch first (pg_walinspect), and by record type.
func (m *meter) walByRelation(ctx context.Context, from, to string, x *result, w *os.File) error {
	if _, err := m.pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err != nil {
		return err
	}
	rows, err := m.pool.Query(ctx, `WITH r AS (
			SELECT resource_manager || '/' || split_part(record_type, ' ', 1) AS kind, record_length + fpi_length AS len,
				substring(block_ref FROM 'rel \d+/\d+/(\d+)')::oid AS node
			FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn))
		SELECT coalesce(pg_filenode_relation(0, node)::regclass::text, node::text, '-') AS rel, kind, count(*), sum(len)
		FROM r GROUP BY 1, 2 ORDER BY 4 DESC LIMIT 40`, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Fprintf(w, "\nWAL by relation (pg_walinspect; the first block a record touches)\n\n| relation | record | records | records/run | bytes/run |\n|---|---|---|---|---|\n")
	for rows.Next() {
		var rel, kind string
		var n, bytes int64
		if err := rows.Scan(&rel, &kind, &n, &bytes); err != nil {
			return err
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.1f | %.0f |\n", rel, kind, n, float64(n)/float64(x.Runs), float64(bytes)/float64(x.Runs))
	}
	return rows.Err()
}

// tables writes the tables most updated, and how many of their updates
// were HOT (wrote no index entry).
func (m *meter) tables(ctx context.Context, w *os.File) error {
	rows, err := m.pool.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
		WHERE n_tup_upd > 0 ORDER BY n_tup_upd DESC LIMIT 10`)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Fprintf(w, "\n| table | inserts | updates | HOT updates |\n|---|---|---|---|\n")
	for rows.Next() {
		var name string
		var ins, upd, hot int64
		if err := rows.Scan(&name, &ins, &upd, &hot); err != nil {
			return err
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d |\n", name, ins, upd, hot)
	}
	return rows.Err()
}

// functions writes the functions that took the most time of their own
// (pg_stat_user_functions, track_functions=all).
func (m *meter) functions(ctx context.Context, x *result, w *os.File) error {
	// Idle backends report their statistics within 10 s (PGSTAT_IDLE_INTERVAL).
	time.Sleep(11 * time.Second)
	rows, err := m.pool.Query(ctx, `SELECT schemaname || '.' || funcname, calls, self_time, total_time
		FROM pg_stat_user_functions ORDER BY self_time DESC LIMIT 25`)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Fprintf(w, "\nFunctions by self time (pg_stat_user_functions)\n\n| function | calls | self ms | self µs/step | total µs/step |\n|---|---|---|---|---|\n")
	for rows.Next() {
		var name string
		var calls int64
		var self, total float64
		if err := rows.Scan(&name, &calls, &self, &total); err != nil {
			return err
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.0f |\n", name, calls, self, self*1000/float64(x.Steps), total*1000/float64(x.Steps))
	}
	return rows.Err()
}

// writeWaits writes the sampled waits, most frequent first.
func writeWaits(w *os.File, waits map[string]int) {
	type kv struct {
		k string
		n int
	}
	var all []kv
	total := 0
	for k, n := range waits {
		all = append(all, kv{k, n})
		total += n
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	fmt.Fprintf(w, "\nActive backends sampled every 5 ms (%d samples): wait | statement\n\n", total)
	for i, x := range all {
		if i == 20 {
			break
		}
		fmt.Fprintf(w, "- %5.1f%% %s\n", 100*float64(x.n)/float64(max(total, 1)), x.k)
	}
}

// profile writes the top statements, nested ones included, by total time.
func (m *meter) profile(ctx context.Context, x *result, w *os.File) error {
	rows, err := m.pool.Query(ctx, `SELECT toplevel, calls, plans, total_exec_time, total_plan_time, rows, shared_blks_hit, wal_bytes,
		regexp_replace(left(query, 160), '\s+', ' ', 'g')
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time + total_plan_time DESC LIMIT $1`, *topN)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Fprintf(w, "\n## %s %s: %d runs, %d steps\n\n", x.Side, x.Workload, x.Runs, x.Steps)
	fmt.Fprintln(w, "| top | calls | plans | ms total | µs/step | plan µs/step | rows | blks hit | WAL B/call | query |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for rows.Next() {
		var top bool
		var calls, plans, nrows, hits int64
		var total, planned float64
		var wal float64
		var q string
		if err := rows.Scan(&top, &calls, &plans, &total, &planned, &nrows, &hits, &wal, &q); err != nil {
			return err
		}
		fmt.Fprintf(w, "| %v | %d | %d | %.0f | %.0f | %.0f | %d | %d | %.0f | `%s` |\n", top, calls, plans, total, total*1000/float64(x.Steps), planned*1000/float64(x.Steps), nrows, hits, wal/float64(max(calls, 1)), strings.ReplaceAll(q, "|", "\\|"))
	}
	return rows.Err()
}
