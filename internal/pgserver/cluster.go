package pgserver

// ShutdownMode is how [Cluster.Stop] stops the server.
type ShutdownMode int

const (
	// FastShutdown (SIGINT) disconnects every session, rolls back their open
	// transactions and writes a checkpoint before the server exits: a
	// planned outage.
	FastShutdown ShutdownMode = iota
	// ImmediateShutdown (SIGQUIT, pg_ctl -m immediate) ends every server
	// process at once, without a checkpoint: what a crash of the server
	// looks like to its clients. The next start runs crash recovery.
	ImmediateShutdown
)

// String names the mode as pg_ctl -m does.
func (m ShutdownMode) String() string {
	if m == ImmediateShutdown {
		return "immediate"
	}
	return "fast"
}
