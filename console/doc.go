// Package console is docket's web console as an [http.Handler] a Go
// service mounts under a path of its own, behind its own sign-in.
//
// The console holds two sets of pages. The worklist shows each visitor the
// tasks they may take and hold, with the forms to claim, release and
// decide them. The operators' pages, under console/, show the jobs of each
// project by queue and state, the uncertain and dead jobs with the forms to
// reconcile or cancel them, cases with their keys, obligations and waits,
// dead letters, schedules, runs of plans and batches.
//
// # Who sees what
//
// The host names each request's principal through
// [Config.AuthenticateFunc]: its own session cookie, an auth proxy's
// header, basic auth. The console then reads and writes through docket's
// API as that principal, on a pool whose login is a docket_app member
// bound to the principals the host signs in (access.Client.Bind, or
// "docket bind"), so the database's grants decide what each visitor sees
// and may do: the console checks no grant itself, and shows a form only as
// a hint that the database would accept it.
//
// # Mounting
//
// Give the console the path it is mounted under as [Config.Prefix] and
// route that path's subtree to it:
//
//	h, err := console.New(pool, console.Config{Prefix: "/ops", AuthenticateFunc: whoIs})
//	mux.Handle("/ops/", h)
//
// Its pages link to one another, redirect and set their cookie under the
// prefix. Its stylesheet and script are embedded and served under the
// prefix too: no page fetches anything from elsewhere, and every response
// carries a Content-Security-Policy that says so.
//
// A docket in several cells (package cells) is served by [NewCells]: each
// cell's console under PREFIX/cells/NAME, and at PREFIX/ a page of every
// cell whose rows each name their cell.
//
// # Forms
//
// Every form carries the browser's CSRF token, which the console keeps in
// its own cookie (SameSite=Strict, HttpOnly); a POST without it, or sent
// from another origin, is refused before the database is asked anything.
// Served on a login that is only a docket_reader member, the console runs
// read-only. docs/console.md says more.
package console
