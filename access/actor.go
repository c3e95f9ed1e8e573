package access

import (
	"fmt"
	"regexp"

	"github.com/docket-dev/docket/db"
)

// Actor is a principal acting on docket: "kind:name", where kind is 1-32
// characters of [a-z0-9_-] starting with a letter, and name is 1-200
// characters of [A-Za-z0-9._@+:/-] starting with a letter or digit.
// Examples: svc:billing, user:ana, worker:host-7/pid-12.
type Actor string

var actorPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}:[A-Za-z0-9][A-Za-z0-9._@+:/-]{0,199}$`)

// Validate refuses a malformed actor with [db.ErrInvalidArgument]. The
// database applies the same rule (docket.valid_principal).
func (a Actor) Validate() error {
	if !actorPattern.MatchString(string(a)) {
		return db.Refuse(db.ErrInvalidArgument, "actor.validate",
			fmt.Sprintf("invalid actor %q: want kind:name, e.g. svc:billing", string(a)))
	}
	return nil
}

func (a Actor) String() string { return string(a) }
