package worker

import (
	"context"
	"sync"
	"time"
)

// Batching shapes a group commit: requests from many handlers gathered into
// one statement and one commit.
type Batching struct {
	// Max is the most requests one statement carries: 1..1000. Defaults to
	// 200.
	Max int
	// Window is how long a batch waits for more requests after its first
	// arrived, when it is not full: 0 .. 100 ms. Defaults to 2 ms. A negative
	// value means none: a batch flushes as soon as a flusher is free, which
	// adds no wait at low load but under load commits small batches, each
	// paying for a commit of its own.
	Window time.Duration
	// Flushers is how many batches may be committing at once: 1..64.
	// Defaults to 4.
	Flushers int
}

func (b Batching) withDefaults() Batching {
	if b.Max == 0 {
		b.Max = 200
	}
	if b.Flushers == 0 {
		b.Flushers = 4
	}
	switch {
	case b.Window == 0:
		b.Window = 2 * time.Millisecond
	case b.Window < 0:
		b.Window = 0
	}
	return b
}

// batcher gathers requests and hands them to flush in batches. do blocks
// until its request's batch has been flushed.
type batcher[In, Out any] struct {
	cfg   Batching
	flush func(ctx context.Context, in []In) ([]Out, error)

	requests chan batchRequest[In, Out]
	// pendingHook, when set (by tests, before the first request), is told
	// how many requests wait after each one arrives.
	pendingHook func(pending int)
	stop        chan struct{}
	done        chan struct{}
}

type batchRequest[In, Out any] struct {
	in    In
	reply chan batchReply[Out]
}

type batchReply[Out any] struct {
	out Out
	err error
}

// newBatcher starts a batcher; flush must return one Out per In, in order,
// or an error for the whole batch. ctx is what flushes run under.
func newBatcher[In, Out any](ctx context.Context, cfg Batching, flush func(ctx context.Context, in []In) ([]Out, error)) *batcher[In, Out] {
	b := &batcher[In, Out]{
		cfg: cfg.withDefaults(), flush: flush,
		requests: make(chan batchRequest[In, Out]),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.loop(ctx)
	return b
}

// do submits in and waits for its batch's answer. A request whose ctx ends
// before it joins a batch returns ctx's error; once in a batch, it waits for
// the flush, so the answer (say, a claim) is never lost.
func (b *batcher[In, Out]) do(ctx context.Context, in In) (Out, error) {
	req := batchRequest[In, Out]{in: in, reply: make(chan batchReply[Out], 1)}
	select {
	case b.requests <- req:
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	case <-b.stop:
		var zero Out
		return zero, errStopped
	}
	r := <-req.reply
	return r.out, r.err
}

// close stops taking requests and waits for the batches in flight.
func (b *batcher[In, Out]) close() {
	close(b.stop)
	<-b.done
}

func (b *batcher[In, Out]) loop(ctx context.Context) {
	defer close(b.done)
	var (
		pending []batchRequest[In, Out]
		first   time.Time // when the oldest pending request arrived
		slots   = make(chan struct{}, b.cfg.Flushers)
		freed   = make(chan struct{}, b.cfg.Flushers)
		wg      sync.WaitGroup
		timer   = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer wg.Wait()
	for {
		// Flush while there is something to flush, a free flusher, and the
		// batch is full or its window has passed.
		for len(pending) > 0 {
			if len(pending) < b.cfg.Max && b.cfg.Window > 0 {
				if wait := b.cfg.Window - time.Since(first); wait > 0 {
					timer.Reset(wait)
					break
				}
			}
			acquired := false
			select {
			case slots <- struct{}{}:
				acquired = true
			default:
			}
			if !acquired {
				break
			}
			n := min(len(pending), b.cfg.Max)
			batch := pending[:n:n]
			pending = pending[n:]
			first = time.Now()
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.run(ctx, batch)
				<-slots
				freed <- struct{}{} // never blocks: one per slot
			}()
		}
		select {
		case req := <-b.requests:
			if len(pending) == 0 {
				first = time.Now()
			}
			pending = append(pending, req)
			if b.pendingHook != nil {
				b.pendingHook(len(pending))
			}
		case <-freed:
		case <-timer.C:
		case <-b.stop:
			// Flush what was accepted; the deferred Wait waits for the
			// flushers still running.
			for len(pending) > 0 {
				n := min(len(pending), b.cfg.Max)
				b.run(ctx, pending[:n])
				pending = pending[n:]
			}
			return
		}
	}
}

// run flushes batch and answers each request.
func (b *batcher[In, Out]) run(ctx context.Context, batch []batchRequest[In, Out]) {
	in := make([]In, len(batch))
	for i, r := range batch {
		in[i] = r.in
	}
	out, err := b.flush(ctx, in)
	if err == nil && len(out) != len(in) {
		err = errBatchShape
	}
	for i, r := range batch {
		if err != nil {
			r.reply <- batchReply[Out]{err: err}
			continue
		}
		r.reply <- batchReply[Out]{out: out[i]}
	}
}
