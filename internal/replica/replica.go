// Package replica is where docket's clients send the reads that tolerate
// lag, one way for all of them: to the replica their Config names, or, with
// none, to their pool on the primary; and how they ask that replica how far
// behind it is.
package replica

import (
	"context"
	"time"

	"github.com/docket-dev/docket/db"
)

// Reads is where a client's reads that tolerate lag go.
type Reads struct {
	// DB is the replica, or the client's pool when it has none.
	DB      db.DBTX
	replica bool
}

// New returns the reads of a client on pool with replica: replica when it is
// not nil (nor a nil pointer), pool otherwise.
func New(pool, replica db.Pool) Reads {
	if db.IsNil(replica) {
		return Reads{DB: pool}
	}
	return Reads{DB: replica, replica: true}
}

// replayLag asks a server whether it is in recovery and, if so, the commit
// instant of the last transaction it replayed. It reads no docket table.
const replayLag = `SELECT pg_is_in_recovery(), pg_last_xact_replay_timestamp()`

// Lag asks where r's reads go how far behind the primary it is, at clock's
// now, under operation op. Reads without a replica go to the primary: that
// is said without asking.
func (r Reads) Lag(ctx context.Context, clock db.Clock, op string) (db.Lag, error) {
	if !r.replica {
		return db.Lag{At: clock.Now()}, nil
	}
	var inRecovery bool
	var replayed *time.Time
	if err := r.DB.QueryRow(ctx, replayLag).Scan(&inRecovery, &replayed); err != nil {
		return db.Lag{}, db.Translate(err, op)
	}
	return lagOf(clock.Now(), inRecovery, replayed), nil
}

// lagOf is the lag of a server that answered replayLag with inRecovery and
// replayed (nil when it has replayed nothing), read at at.
func lagOf(at time.Time, inRecovery bool, replayed *time.Time) db.Lag {
	l := db.Lag{Replica: inRecovery, At: at}
	if !inRecovery || replayed == nil {
		return l
	}
	l.Replayed = replayed.UTC()
	if d := at.Sub(l.Replayed); d > 0 {
		l.Behind = d
	}
	return l
}
