//go:build !unix

package pgtest

import (
	"context"
	"errors"
)

// errNoLocalBinaries says that local binaries are not supported here.
var errNoLocalBinaries = errors.New("starting local PostgreSQL binaries is only supported on unix")

// localPostgres is never started on this platform.
type localPostgres struct {
	url    string
	binDir string
	dir    string
}

// startLocal always returns errNoLocalBinaries on this platform.
func startLocal(context.Context) (*localPostgres, error) {
	return nil, errNoLocalBinaries
}

// stop does nothing and returns nil.
func (*localPostgres) stop(context.Context) error { return nil }
