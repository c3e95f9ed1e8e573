// Package tenancy tests that projects are apart: every function of docket's
// API, called by a login with no grant on a project and naming that
// project's records, is refused or answers nothing, and leaves every docket
// table as it was; and that every function checks its caller, refusing an
// actor the login is not bound to. The functions are read from
// docket.api_functions and their arguments derived from pg_proc, so a new
// function is covered without editing the tests.
package tenancy
