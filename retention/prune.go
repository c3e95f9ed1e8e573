package retention

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/retention"
	"github.com/docket-dev/docket/worker"
)

// SweepName is the prune sweep's name, for worker.Client.Sweep.
const SweepName = "prune"

// DefaultSweepEvery is the prune sweep's period when none is given.
const DefaultSweepEvery = time.Minute

// Sweep returns the prune sweep, for worker.Config.Sweeps: each run is one
// [Client.PruneTx] of up to the run's limit of items, acting as the
// worker's actor, in the projects where that actor holds retention.prune.
// every is its period (zero: [DefaultSweepEvery]). A job kept because its
// history did not verify is logged at WARN with its prune.
func Sweep(every time.Duration) worker.Sweep {
	if every == 0 {
		every = DefaultSweepEvery
	}
	return worker.Sweep{Name: SweepName, Every: every, Func: func(ctx context.Context, run *worker.SweepRun) (int, error) {
		// The sweep's transaction is its own, begun for this run: READ
		// COMMITTED whatever the session's default (see PruneTx).
		if err := readCommitted(ctx, run.Tx); err != nil {
			return 0, err
		}
		prunes, err := prune(ctx, run.Tx, string(run.Actor), run.Limit, run.Now)
		if err == nil {
			_, err = maintainHistory(ctx, run.Tx, string(run.Actor))
		}
		moved := 0
		for _, p := range prunes {
			moved += p.Removed()
			if p.KeptUnverified > 0 {
				run.Logger.WarnContext(ctx, "docket prune: kept jobs whose history does not verify",
					"project", p.Project, "prune", p.ID, "kept", p.KeptUnverified, "first", *p.FirstUnverified,
					"next", "docket job verify names the first bad event; such a job is kept until an operator repairs or explains it")
			}
		}
		return moved, err
	}}
}

// Prune runs one prune of up to limit items (1 .. [MaxBatch]) at the
// client's now, in its own transaction. See [Client.PruneTx].
func (c *Client) Prune(ctx context.Context, limit int) (out []Prune, err error) {
	err = db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		if err = readCommitted(ctx, tx); err != nil {
			return err
		}
		if out, err = c.PruneTx(ctx, tx, limit); err != nil {
			return err
		}
		_, err = maintainHistory(ctx, tx, string(c.actor))
		return err
	})
	return out, err
}

// readCommitted sets tx, begun for a prune and not used yet, to READ
// COMMITTED whatever the session's default: a prune deletes jobs, which
// docket allows under READ COMMITTED only (see [Client.PruneTx]).
func readCommitted(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		return db.Translate(err, "retention.prune")
	}
	return nil
}

// HistoryLockWait is how long the prune's history maintenance waits for
// the lock on the job history to drop or make a partition (three tries
// each), before leaving it to the next prune: enqueues wait on that lock
// no longer than this.
const HistoryLockWait = 50 * time.Millisecond

// HistoryUpkeep is what one upkeep of the job history's partitions did.
type HistoryUpkeep struct {
	Dropped int // partitions dropped whole: every job of their range pruned and recorded
	Made    int // partitions made ahead of the jobs id sequence
}

// MaintainHistoryTx drops, in tx, the partitions of the job history whose
// jobs prunes all removed and recorded, and makes those ahead of the jobs
// id sequence (docs/retention.md, "History partitions"). [Client.Prune]
// and the prune sweep do it after each prune; a caller of [Client.PruneTx]
// calls it last in its transaction, or in one of its own after. It takes
// the history's lock for an instant, waiting at most [HistoryLockWait].
// An actor holding retention.prune nowhere does nothing. The drops and the
// partitions made commit with tx, or roll back with it; until tx ends, the
// history's lock is held, so call it last.
func (c *Client) MaintainHistoryTx(ctx context.Context, tx pgx.Tx) (HistoryUpkeep, error) {
	return maintainHistory(ctx, tx, string(c.actor))
}

// MaintainHistory is [Client.MaintainHistoryTx] in a transaction of its own.
func (c *Client) MaintainHistory(ctx context.Context) (u HistoryUpkeep, err error) {
	err = db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		u, err = c.MaintainHistoryTx(ctx, tx)
		return err
	})
	return u, err
}

func maintainHistory(ctx context.Context, q db.DBTX, actor string) (HistoryUpkeep, error) {
	rows, err := queries.HistoryMaintain(ctx, q, actor, HistoryLockWait)
	if err != nil {
		return HistoryUpkeep{}, db.Translate(err, "retention.history")
	}
	var u HistoryUpkeep
	for _, r := range rows {
		u.Dropped += int(r.Dropped)
		u.Made += int(r.Made)
	}
	return u, nil
}

// PruneTx removes, in tx, up to limit items (jobs, closed cases counted with
// their jobs, messages) past their projects' horizons, in the projects
// where the actor holds retention.prune, oldest first, and returns the
// record of each project it pruned. It refuses a limit outside
// 1 .. [MaxBatch] with [db.ErrInvalidArgument]; a project where the actor
// may not prune is not looked at. Items another transaction holds are
// skipped: prunes running at once remove each item once. The removal and
// its record commit with tx, or roll back with it, leaving everything as it
// was. tx must be READ COMMITTED: the check that no row still names a job
// it deletes must see what committed while the delete waited, which a
// transaction snapshot does not; a prune that deletes jobs under
// REPEATABLE READ or SERIALIZABLE is refused with [db.ErrInvalidArgument],
// nothing changed.
func (c *Client) PruneTx(ctx context.Context, tx pgx.Tx, limit int) ([]Prune, error) {
	return prune(ctx, tx, string(c.actor), limit, c.clock.Now())
}

func prune(ctx context.Context, q db.DBTX, actor string, limit int, now time.Time) ([]Prune, error) {
	const op = "retention.prune"
	if limit < 1 || limit > MaxBatch {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid prune limit %d: want 1..%d", limit, MaxBatch))
	}
	rows, err := queries.PruneRun(ctx, q, int32(limit), actor, now)
	if err != nil {
		return nil, db.Translate(err, op)
	}
	out := make([]Prune, len(rows))
	for i, r := range rows {
		if out[i], err = fromPruneRow(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// GetPrune returns prune id, or [db.ErrNotFound] when there is none or the
// actor holds neither a job capability nor retention.manage on its project.
func (c *Client) GetPrune(ctx context.Context, id int64) (Prune, error) {
	r, err := queries.PruneGet(ctx, c.pool, id, string(c.actor))
	if err != nil {
		return Prune{}, db.Translate(err, "retention.get_prune", "prune", id)
	}
	return fromPruneRow((*pruneRow)(r))
}

// MaxList is the most prunes one call of [Client.Prunes] returns.
const MaxList = 1000

// Prunes returns up to limit (1 .. [MaxList]) of project's prunes, newest
// first, those before prune id before when it is not 0; none when the actor
// holds neither a job capability nor retention.manage on project.
func (c *Client) Prunes(ctx context.Context, project string, before int64, limit int) ([]Prune, error) {
	const op = "retention.prunes"
	if limit < 1 || limit > MaxList {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("invalid limit %d: want 1..%d", limit, MaxList))
	}
	rows, err := queries.PruneList(ctx, c.pool, project, string(c.actor), before, int32(limit))
	if err != nil {
		return nil, db.Translate(err, op, "project", project)
	}
	out := make([]Prune, len(rows))
	for i, r := range rows {
		if out[i], err = fromPruneRow((*pruneRow)(r)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Head is the end of one job's hash chain: what a prune's digest is over.
type Head struct {
	Job    int64
	Events int
	// Hash is the hash of the job's last event.
	Hash []byte
	// OK says the chain verified when read (set by [Client.Heads]).
	OK bool
}

// MaxHeads is the most jobs one call of [Client.Heads] or [Client.Verify]
// takes.
const MaxHeads = 100000

// Heads returns the chain heads of the jobs of ids the actor may read, by
// id, each verified as a prune verifies it: what an auditor keeps before a
// prune to check its record later with [Client.Verify].
func (c *Client) Heads(ctx context.Context, ids []int64) ([]Head, error) {
	const op = "retention.heads"
	if len(ids) > MaxHeads {
		return nil, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d ids: want at most %d", len(ids), MaxHeads))
	}
	rows, err := queries.JobHeads(ctx, c.pool, ids, string(c.actor))
	if err != nil {
		return nil, db.Translate(err, op)
	}
	out := make([]Head, len(rows))
	for i, r := range rows {
		out[i] = Head{Job: r.JobID, Events: int(r.Events), Hash: r.Head, OK: r.Ok}
	}
	return out, nil
}

// Verification is the verdict on chain heads checked against a prune.
type Verification struct {
	OK      bool
	Problem string // why not, when not OK
}

// Verify checks heads against prune id's record: the same jobs, and heads
// that hash to the digest it recorded. A mismatch is a Verification that is
// not OK, saying why, not an error. An unknown prune, or one the actor may
// not read (see [Client.GetPrune]), is [db.ErrNotFound].
func (c *Client) Verify(ctx context.Context, id int64, heads []Head) (Verification, error) {
	const op = "retention.verify"
	if len(heads) > MaxHeads {
		return Verification{}, db.Refuse(db.ErrInvalidArgument, op, fmt.Sprintf("%d heads: want at most %d", len(heads), MaxHeads))
	}
	p := dbsqlc.PruneVerifyParams{ID: id, Actor: string(c.actor),
		Ids: make([]int64, len(heads)), Events: make([]int32, len(heads)), Heads: make([][]byte, len(heads))}
	for i, h := range heads {
		p.Ids[i], p.Events[i], p.Heads[i] = h.Job, int32(h.Events), h.Hash
	}
	r, err := queries.PruneVerify(ctx, c.pool, p)
	if err != nil {
		return Verification{}, db.Translate(err, op, "prune", id)
	}
	return Verification{OK: r.Ok, Problem: r.Problem}, nil
}

// ChainDigest computes, as docket.prune_digest does, the digest a prune
// records over the chain heads of the jobs it removed: sha256 of
// "ID:EVENTS:HEAD\n" for each job in ascending id, HEAD in lowercase hex.
func ChainDigest(heads []Head) []byte {
	hs := slices.Clone(heads)
	slices.SortFunc(hs, func(a, b Head) int { return cmp.Compare(a.Job, b.Job) })
	var b bytes.Buffer
	for _, h := range hs {
		b.WriteString(strconv.FormatInt(h.Job, 10))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(h.Events))
		fmt.Fprintf(&b, ":%x\n", h.Hash)
	}
	sum := sha256.Sum256(b.Bytes())
	return sum[:]
}
