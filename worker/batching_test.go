package worker

import "testing"

// Left 0, Batching.Max runs a queue in two batches, of at most 1000 jobs
// each; set, it is every queue's.
func TestBatchSizePerQueue(t *testing.T) {
	for _, c := range []struct {
		max, handlers, want, batches int
	}{
		{0, 1, 1, 1},
		{0, 2, 1, 2},
		{0, 3, 2, 2},
		{0, 100, 50, 2},
		{0, 150, 75, 2},
		{0, 200, 100, 2},
		{0, 201, 101, 2},
		{0, 1000, 500, 2},
		{0, 2000, 1000, 2},
		{0, 5000, 1000, 5},
		{0, 10000, 1000, 10},
		{8, 1000, 8, 125},
		{1000, 10, 1000, 1},
	} {
		got := Batching{Max: c.max}.perQueue(c.handlers)
		if batches := (c.handlers + got - 1) / got; got != c.want || batches != c.batches {
			t.Errorf("Max %d, %d handlers: batches of %d, %d of them; want %d, %d", c.max, c.handlers, got, batches, c.want, c.batches)
		}
	}
}
