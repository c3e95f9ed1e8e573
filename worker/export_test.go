package worker

import (
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listening returns a channel closed once w listens on [NotifyChannel]: a
// test that shows a job ran through its notification, and not through the
// poll, enqueues it after.
func Listening(w *Client) <-chan struct{} { return w.listening }

// riverClients counts the River clients built on each pool.
var riverClients sync.Map // *pgxpool.Pool → *atomic.Int64

func init() {
	testHookRiverClient = func(pool *pgxpool.Pool) {
		n, _ := riverClients.LoadOrStore(pool, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
}

// RiverClients returns how many River clients have been built on pool: one
// per [NewClient] on it, and no more.
func RiverClients(pool *pgxpool.Pool) int64 {
	n, ok := riverClients.Load(pool)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// OnClaim makes w tell f of each batch claim that committed: its queue, how
// many jobs it asked for and how many it took. Set before w starts.
func OnClaim(w *Client, f func(queue string, asked, took int)) { w.testHookClaim = f }

// OnClaimed makes w call f with each batch claim still in its transaction,
// before the batch asks whether Stop has begun: its queue and how many jobs
// it took. Set before w starts.
func OnClaimed(w *Client, f func(queue string, took int)) { w.testHookClaimed = f }

// Quit returns a channel closed once w's Stop has begun.
func Quit(w *Client) <-chan struct{} { return w.quit }
