package worker_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// userHZ is the unit of the times in /proc/PID/stat on Linux.
const userHZ = 100

func cpuNow(ctx context.Context, pool *pgxpool.Pool) cpuUse {
	var u cpuUse
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		u.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity`)
	if err != nil {
		return u
	}
	var pids []int
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			pids = append(pids, pid)
		}
	}
	rows.Close()
	if rows.Err() != nil || len(pids) == 0 {
		return u
	}
	var ticks int64
	postmaster := 0
	for _, pid := range pids {
		st, ok := procStat(pid)
		if !ok {
			return u // not this machine's process: the server is elsewhere
		}
		ticks += st.utime + st.stime
		postmaster = st.ppid
	}
	pm, ok := procStat(postmaster)
	if !ok {
		return u
	}
	ticks += pm.utime + pm.stime + pm.cutime + pm.cstime
	u.server = time.Duration(ticks) * time.Second / userHZ
	u.serverKnown = true
	return u
}

type stat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads /proc/pid/stat of a process named postgres.
func procStat(pid int) (stat, bool) {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		return stat{}, false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// The fields after the command, which is in parentheses: state, ppid,
	// ..., utime (the 14th field of the line), stime, cutime, cstime.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return stat{}, false
	}
	n := func(i int) int64 {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return v
	}
	return stat{ppid: int(n(1)), utime: n(11), stime: n(12), cutime: n(13), cstime: n(14)}, true
}

// startProfile starts, when -docket.bench.perf names a prefix, a system-wide
// Linux perf recording (call graphs, 999 Hz) of one side of a burn-down into
// PREFIX.side.data, and returns what stops it. Read it with, for example,
// perf report -i PREFIX.docket.data --comm postgres --no-children.
func startProfile(b *testing.B, side string) (stop func()) {
	b.Helper()
	if *benchPerf == "" {
		return func() {}
	}
	out := *benchPerf + "." + side + ".data"
	cmd := exec.Command("perf", "record", "-a", "-g", "-F", "999", "-o", out)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("-docket.bench.perf needs Linux perf: %v", err)
	}
	// perf opens its events after it starts; until its output file exists,
	// nothing is being recorded.
	for i := 0; i < 200; i++ {
		if st, err := os.Stat(out); err == nil && st.Size() > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return func() {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			b.Errorf("stopping perf: %v", err)
		}
		if err := cmd.Wait(); err != nil {
			b.Logf("perf: %v", err)
		}
	}
}
