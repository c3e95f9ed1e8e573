// Package newclient checks what every docket client's constructor is given,
// one way for all of them: a pool that is not nil, a well-formed actor, and
// a clock, the system's when none is given.
package newclient

import "github.com/docket-dev/docket/db"

// Check refuses, under constructor op, a nil pool with
// [db.ErrInvalidArgument] and an actor that validateActor refuses, and
// returns the clock the client is to use: clock, or [db.SystemClock] when
// clock is nil.
func Check(op string, pool db.Pool, validateActor func() error, clock db.Clock) (db.Clock, error) {
	if db.IsNil(pool) {
		return nil, db.Refuse(db.ErrInvalidArgument, op, "pool is nil")
	}
	if err := validateActor(); err != nil {
		return nil, err
	}
	if clock == nil {
		return db.SystemClock{}, nil
	}
	return clock, nil
}
