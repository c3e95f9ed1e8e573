package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clkTck is the kernel's USER_HZ, 100 on every Linux docket runs on.
const clkTck = 100

// statFields returns the fields of /proc/pid/stat after the command name.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	return strings.Fields(s[i+1:]), nil
}

func parentPID(pid int) (int, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[1])
}

// clusterCPU is the user+system time of the postmaster, of its live
// children, and of its children that have exited (cutime+cstime): every
// backend and background process of the cluster.
func clusterCPU(postmaster int) (time.Duration, error) {
	f, err := statFields(postmaster)
	if err != nil {
		return 0, err
	}
	ticks := sumFields(f, 11, 12, 13, 14) // utime stime cutime cstime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		cf, err := statFields(pid)
		if err != nil || cf[1] != strconv.Itoa(postmaster) {
			continue
		}
		ticks += sumFields(cf, 11, 12)
	}
	return time.Duration(ticks) * time.Second / clkTck, nil
}

func sumFields(f []string, idx ...int) int64 {
	var n int64
	for _, i := range idx {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		n += v
	}
	return n
}
