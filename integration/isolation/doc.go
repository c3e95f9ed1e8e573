// Package isolation holds docket's isolation tests: every rule that reads
// rows other than the one it writes (a close and what the case owes, a
// quota and its reservations, a delivery and the waits on its keys, a run's
// outcomes and the steps they admit) is raced under READ COMMITTED,
// REPEATABLE READ and SERIALIZABLE, with the other side's commit landing
// between the first side's snapshot and its write. The rule holds at every
// level: the later side is refused (or sees the earlier and acts on it)
// under READ COMMITTED, and fails with db.ErrSerialization (40001), writing
// nothing, under the two snapshot levels; run again, it decides as READ
// COMMITTED does. The package has tests only.
package isolation
