// Package pgserver finds a PostgreSQL server to run against: the admin URL
// in the environment, or a throw-away local cluster made with initdb and run
// as a child process. It creates and drops databases on that server and
// stops what it started. It imports neither testing nor any container
// library, so commands can use it: docket demo gets its scratch database
// here, and the test helpers in integration/pgtest are built on it.
//
// # Finding a server
//
// [Find] tries, in order:
//
//  1. The admin URL in the environment variable DOCKET_TEST_DATABASE_URL
//     ([EnvURL]), for a role allowed to CREATE DATABASE, for example
//     postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable.
//     Nothing else is tried when it is set.
//  2. Local server binaries ([StartLocal]: initdb and postgres, found in
//     PATH, in pg_config --bindir or in the newest
//     /usr/lib/postgresql/*/bin): a cluster (UTF8, C locale) is initialised
//     in a temporary directory, in /dev/shm when that is a tmpfs with a
//     gigabyte free, and postgres runs as a child of this process on a free
//     port of 127.0.0.1, with durability turned off and
//     [DefaultMaxConnections] connections. On Linux the kernel kills it if
//     this process dies; its directory is removed by [Server.Close], or by
//     the next start that finds it orphaned. When run as root, initdb and
//     postgres run as the "postgres" system user.
//  3. Each [Starter] the caller passes, such as pgtest's Docker container.
//
// The environment variable DOCKET_TEST_POSTGRES ([EnvOnly]) narrows this
// to one way: "url", "local" or a Starter's name ("container"); that way
// failing is then an error, never a reason to try another.
//
// If none of these works, Find returns an error wrapping [ErrNotFound] that
// says, in one line, what to set or install. The server must be PostgreSQL
// 13 or later. Nothing here starts, stops or reconfigures a server it did
// not start itself.
//
// # Databases
//
// [Server.CreateDatabase] and [Server.DropDatabase] make and remove
// databases on a server; [Provision] finds a server and makes one empty
// database on it, which [Database.Close] drops before stopping the server.
package pgserver
