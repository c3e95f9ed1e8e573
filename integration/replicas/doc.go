// Package replicas tests docket's reads from a replica: a primary and a
// streaming standby of it, started from the local PostgreSQL binaries
// (internal/pgserver's StartCluster and StartStandby, never the server of
// DOCKET_TEST_DATABASE_URL), with the jobs, cases and plans clients given
// the standby as their Replica. It has tests only.
//
// The tests show what docs/cells.md promises: a read that tolerates lag goes
// to the replica and sees what the primary committed once the standby has
// replayed it, with the lag it read at measured against the client's clock;
// while the standby's replay is paused, such a read is behind and a …Tx read
// on the primary is not; every write, and what a write returns, goes to the
// primary; and a write sent to the replica itself is refused as
// db.ErrReadOnly. Nothing waits for replay by time: a write that must be
// replayed before the test reads commits with synchronous_commit
// remote_apply, so its commit returns once the standby has applied it.
//
// Without PostgreSQL server binaries (initdb, postgres, pg_basebackup) the
// tests skip.
package replicas
