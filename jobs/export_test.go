package jobs

import "github.com/google/uuid"

// WithoutToken is j as a read returns it: the claim's token, which only a
// claim's answer carries, left out.
func WithoutToken(j Job) Job {
	j.token = uuid.UUID{}
	return j
}
