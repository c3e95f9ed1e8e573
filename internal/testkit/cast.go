package testkit

import "github.com/docket-dev/docket/access"

// The projects and principals docket's tests share. A principal holds
// nothing until a test grants it something; each package's tests say, beside
// their setup, what they grant whom. The names say the part each plays.
const (
	Acme  = "acme"  // the project tests work in
	Other = "other" // a second project, for what must not cross projects

	Ana     access.Actor = "user:ana"    // an administrator: creates projects, gives grants
	Ops     access.Actor = "user:ops"    // an operator, administering too
	Bo      access.Actor = "user:bo"     // a second person
	App     access.Actor = "svc:app"     // the application under test
	Vic     access.Actor = "user:vic"    // a viewer
	Sweeper access.Actor = "svc:sweeper" // runs the sweeps
	Sam     access.Actor = "user:sam"    // holds nothing
	Nobody  access.Actor = "svc:nobody"  // holds nothing
)
