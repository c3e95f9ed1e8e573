package db

import (
	"time"
)

// Lag is how far the reads a client sends to its replica may trail the
// primary: what the clients' ReplicaLag methods (jobs, cases, plans) report,
// and what a read across cells carries (see docs/cells.md).
//
// A replica is a hot standby streaming from the primary; it answers a read
// with the primary's data as of the last transaction it replayed. Asked
// before a read, Lag bounds that read: the read sees every transaction the
// primary committed up to Replayed, and perhaps more.
type Lag struct {
	// Replica reports whether the reads go to a server in recovery: a
	// standby. False: they go to a primary (no replica is configured, or
	// the one configured was promoted), which trails nothing; Replayed and
	// Behind are then zero.
	Replica bool
	// At is the instant of the client's [Clock] when the replica answered.
	At time.Time
	// Replayed is the commit instant, by the primary's clock, of the last
	// transaction the replica replayed (pg_last_xact_replay_timestamp()).
	// Zero on a replica that has replayed no transaction since it started:
	// how far behind it is is then unknown (see [Lag.Known]).
	Replayed time.Time
	// Behind is At less Replayed, and 0 where the two clocks put Replayed
	// after At: the most a read made after asking trails the primary, as
	// far as the caller's clock and the primary's agree. It is a bound, not
	// a measure: while the primary commits nothing, Behind grows though the
	// replica has everything.
	Behind time.Duration
}

// Known reports whether Behind bounds the reads: they go to a primary, or to
// a replica that has replayed a transaction since it started.
func (l Lag) Known() bool { return !l.Replica || !l.Replayed.IsZero() }

// String says where the reads go and how far behind they may be: "primary",
// "replica, at most 1.5s behind" or "replica, lag unknown".
func (l Lag) String() string {
	switch {
	case !l.Replica:
		return "primary"
	case !l.Known():
		return "replica, lag unknown"
	default:
		return "replica, at most " + l.Behind.String() + " behind"
	}
}
