// Package ops is a small service that mounts docket's console under /ops/
// behind a sign-in of its own: read it to see how a service gives its
// people docket's pages.
//
// The service keeps its own users, each with a password and the docket
// principal it acts as ([User]). /login checks the password and gives the
// browser a session cookie signed with the service's key (HMAC-SHA256);
// the console's [console.Config.AuthenticateFunc] verifies that cookie and
// answers with the user's principal, so every page reads and writes as that
// principal and the database's grants decide what it shows. Nobody signed
// in is sent to /login.
package ops
