//go:build unix && !linux

package pgserver

import "syscall"

// setPdeathsig does nothing: only Linux can kill a child when its parent
// dies. Call Server.Close (pgtest.Main, in tests) so the server is stopped
// at the end.
func setPdeathsig(*syscall.SysProcAttr) {}

// memoryBase returns "": no memory file system is known here, so local
// servers live in the temporary directory.
func memoryBase() string { return "" }
