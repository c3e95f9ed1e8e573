package pgserver

import (
	"os"
	"syscall"
)

// setPdeathsig makes the kernel SIGKILL the child when the thread that
// started it exits. startLocal keeps that thread for as long as the child
// runs, so the child dies exactly when this process does.
func setPdeathsig(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// memoryMinFree is how much room the memory file system must have left for
// local servers to use it: a cluster takes about 40 MB, each open test
// database about 8 MB more.
const memoryMinFree = 1 << 30

// memoryBase returns /dev/shm if it is a tmpfs, writable by everyone (the
// server may run as another user) and has memoryMinFree bytes available,
// and "" otherwise.
func memoryBase() string {
	const dir = "/dev/shm"
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Type != tmpfsMagic {
		return ""
	}
	if uint64(st.Bavail)*uint64(st.Bsize) < memoryMinFree {
		return ""
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm()&0o007 != 0o007 {
		return ""
	}
	return dir
}
