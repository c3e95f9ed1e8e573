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
func startLocal(context.Context) (*localPostgres, error) {
	return nil, ErrNoLocalBinaries
}

// stop does nothing and returns nil.
func (*localPostgres) stop(context.Context) error { return nil }
