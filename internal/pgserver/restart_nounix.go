//go:build !unix

package pgserver

import "context"

// ShutdownMode is how [Cluster.Stop] stops the server.
type ShutdownMode int

// The shutdown modes; see the unix build.
const (
	FastShutdown ShutdownMode = iota
	ImmediateShutdown
)

// String names the mode as pg_ctl -m does.
func (m ShutdownMode) String() string {
	if m == ImmediateShutdown {
		return "immediate"
	}
	return "fast"
}

// Cluster is never started on this platform.
type Cluster struct{}

// StartCluster always returns ErrNoLocalBinaries on this platform.
func StartCluster(context.Context) (*Cluster, error) { return nil, ErrNoLocalBinaries }

// AdminURL returns "".
func (*Cluster) AdminURL() string { return "" }

// Running returns false.
func (*Cluster) Running() bool { return false }

// Stop returns ErrNoLocalBinaries.
func (*Cluster) Stop(context.Context, ShutdownMode) error { return ErrNoLocalBinaries }

// Start returns ErrNoLocalBinaries.
func (*Cluster) Start(context.Context) error { return ErrNoLocalBinaries }

// Close returns nil.
func (*Cluster) Close(context.Context) error { return nil }
