//go:build !unix

package pgserver

import (
	"context"
	"fmt"
)

// ErrNoLocalBinaries says that local binaries are not supported here. It
// wraps ErrUnavailable.
var ErrNoLocalBinaries = fmt.Errorf("%w: starting local PostgreSQL binaries is only supported on unix", ErrUnavailable)

// localPostgres is never started on this platform.
type localPostgres struct {
	url    string
	binDir string
	dir    string
}

// startLocal always returns ErrNoLocalBinaries on this platform.
func startLocal(context.Context, LocalConfig) (*localPostgres, error) {
	return nil, ErrNoLocalBinaries
}

// stop does nothing and returns nil.
func (*localPostgres) stop(context.Context) error { return nil }

// ProcessAlive reports true: this platform gives no cheap way to tell, and
// a process taken for alive keeps what it left.
func ProcessAlive(int) bool { return true }
