//go:build unix && !linux

package pgtest

import "syscall"

// setPdeathsig does nothing: only Linux can kill a child when its parent
// dies. Use pgtest.Main so the server is stopped at the end.
func setPdeathsig(*syscall.SysProcAttr) {}

// memoryBase returns "": no memory file system is known here, so local
// servers live in the temporary directory.
func memoryBase() string { return "" }
