//go:build !unix

package pgserver

import "context"

// Cluster is never started on this platform.
type Cluster struct{}

// StartCluster always returns ErrNoLocalBinaries on this platform.
func StartCluster(context.Context) (*Cluster, error) { return nil, ErrNoLocalBinaries }

// AdminURL returns "".
func (*Cluster) AdminURL() string { return "" }

// URL returns ErrNoLocalBinaries.
func (*Cluster) URL(string) (string, error) { return "", ErrNoLocalBinaries }

// Running returns false.
func (*Cluster) Running() bool { return false }

// Stop returns ErrNoLocalBinaries.
func (*Cluster) Stop(context.Context, ShutdownMode) error { return ErrNoLocalBinaries }

// Start returns ErrNoLocalBinaries.
func (*Cluster) Start(context.Context) error { return ErrNoLocalBinaries }

// Close returns nil.
func (*Cluster) Close(context.Context) error { return nil }
