package jobs

import (
	"os"
	"strconv"

	"github.com/google/uuid"
)

// WithoutToken is j as a read returns it: the claim's token, which only a
// claim's answer carries, left out.
func WithoutToken(j Job) Job {
	j.token = uuid.UUID{}
	return j
}

// CopyingFrom returns a copy of c whose EnqueueMany copies batches of n
// specs or more into the intake (COPY FROM), and passes smaller ones as
// arrays.
func CopyingFrom(c *Client, n int) *Client {
	d := *c
	d.copyAt = n
	return &d
}

// DOCKET_TEST_COPY_THRESHOLD, when set, is the package's batch size from
// which EnqueueMany copies: 1 runs every test's EnqueueMany through COPY.
func init() {
	if v := os.Getenv("DOCKET_TEST_COPY_THRESHOLD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			panic("DOCKET_TEST_COPY_THRESHOLD: want a positive integer, got " + v)
		}
		copyThreshold = n
	}
}
