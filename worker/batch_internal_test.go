package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatcherGroupsWaitingRequests sends many requests at once to a batcher
// whose flush blocks until released: while its flushers are busy, requests
// gather, and the next flush takes them together. Every request gets its own
// answer.
func TestBatcherGroupsWaitingRequests(t *testing.T) {
	t.Parallel()
	release, flushing := make(chan struct{}), make(chan struct{})
	var flushes atomic.Int32
	var mu sync.Mutex
	var sizes []int
	b := newBatcher(context.Background(), Batching{Max: 50, Flushers: 1}, func(_ context.Context, in []int) ([]int, error) {
		if flushes.Add(1) == 1 {
			close(flushing)
			<-release // the first flush holds the only flusher
		}
		mu.Lock()
		sizes = append(sizes, len(in))
		mu.Unlock()
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = v * 2
		}
		return out, nil
	})
	defer b.close()
	const n = 120
	allPending := make(chan struct{})
	b.pendingHook = func(pending int) {
		if pending == n {
			close(allPending)
		}
	}

	first := make(chan int)
	go func() {
		v, err := b.do(context.Background(), 0)
		require.NoError(t, err)
		first <- v
	}()
	<-flushing
	var wg sync.WaitGroup
	got := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := b.do(context.Background(), i+1)
			require.NoError(t, err)
			got[i] = v
		}()
	}
	// Wait until all n are pending behind the held flush, then release it.
	<-allPending
	close(release)
	wg.Wait()
	require.Equal(t, 0, <-first)
	for i, v := range got {
		require.Equal(t, 2*(i+1), v)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 50, 50, 20}, sizes, "held requests flush in full batches")
}
