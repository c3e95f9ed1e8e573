// Package pgtest gives tests a real PostgreSQL database with the docket
// schema already migrated: one fresh database per test, cloned in tens of
// milliseconds from a template database, and dropped when the test ends.
// It is meant for docket's own tests and for the tests of programs that use
// docket.
//
// # Finding a server
//
// The first call in a test process finds a PostgreSQL server, and every
// later call uses the same one. In order of preference:
//
//  1. The admin URL in the environment variable DOCKET_TEST_DATABASE_URL,
//     for a role allowed to CREATE DATABASE, for example
//     postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable.
//     Nothing else is tried when it is set.
//  2. Local server binaries (initdb and postgres, found in PATH, in
//     pg_config --bindir or in the newest /usr/lib/postgresql/*/bin): a
//     throw-away cluster (UTF8, C locale) is initialised in a temporary
//     directory, in /dev/shm when that is a tmpfs with a gigabyte free, and
//     postgres runs as a child of the test process on a free port of
//     127.0.0.1, with durability turned off. On Linux the kernel kills it if
//     the test process dies; its directory is removed by Main, or by the
//     next run that finds it orphaned. When tests run as root, initdb and
//     postgres run as the "postgres" system user.
//  3. A container started with testcontainers-go, if a Docker engine answers
//     a ping within a few seconds (DOCKER_HOST, or a docker.sock in a usual
//     place): the image in DOCKET_TEST_POSTGRES_IMAGE ([ImageEnv]), else
//     [DefaultImage]. Any image whose entrypoint takes POSTGRES_PASSWORD as
//     the official one does will do; scripts/pg-image builds one from
//     Debian's packages without a registry. The container is removed by
//     Main, or by testcontainers' reaper (Ryuk) if the process dies; where
//     the reaper cannot run (its image comes from a registry), set
//     TESTCONTAINERS_RYUK_DISABLED=true: the next container this package
//     starts on the machine then removes those left by test processes that
//     died (each carries labels naming its host and process).
//
// DOCKET_TEST_POSTGRES=container (or local, or url) allows that one way and
// no other: a run meant to test the container path fails when it cannot
// start a container, instead of passing on local binaries.
//
// If none of these works, every call fails the test with a one-line message
// saying what to set or install. The server must be PostgreSQL 13 or later.
// No server this package did not start is ever restarted or reconfigured.
//
// Finding a server, starting local binaries and creating and dropping
// databases are done by the internal package internal/pgserver, which
// commands such as docket demo use without linking testing or
// testcontainers; this package adds the Docker container, the template and
// the helpers that take a testing.TB.
//
// # Template and per-test databases
//
// The migrated template database is named docket_tmpl_ followed by
// db.SchemaFingerprint, so it is rebuilt only when the schema changes. It is
// built at most once per process, under a PostgreSQL advisory lock, so test
// processes sharing a server (go test ./... runs packages in parallel)
// build it once between them and reuse it in later runs. Each test database
// is named docket_t_ followed by random hex digits and is dropped WITH
// (FORCE) in the test's cleanup. Templates of older schemas stay on the
// server unless a [Suite] is asked to clean them.
//
// # Suites: a prefix, the application's migrations, cleaning
//
// The package functions use the default options. A [Suite], made once with
// [New], has its own:
//
//	var suite = pgtest.MustNew(pgtest.Options{
//		Prefix:         "shop_",          // shop_tmpl_…, shop_t_…
//		Migrate:        shopdb.Migrate,   // the application's tables, in the template
//		MigrateVersion: shopdb.Version,   // or pgtest.HashFS(shopdb.Migrations)
//	})
//
//	pool := suite.NewDB(t)
//
// Suites with different prefixes share a server without touching each
// other's databases. MigrateVersion goes into the template's fingerprint,
// so applications with different migrations never share a template, and a
// new version builds a new one. [Options.CleanStaleTemplates] drops the
// suite's own templates of other fingerprints older than a day when it
// builds a new one; it never looks at another prefix. The package
// functions' suite does so when DOCKET_TEST_CLEAN_TEMPLATES=1
// ([CleanTemplatesEnv]).
//
// Nothing here needs a superuser: the admin role must be allowed to CREATE
// DATABASE. It owns what it creates, so it may drop it WITH (FORCE) while
// its own connections are open; connections of other roles (logins a test
// made) need the admin role to be a member of pg_signal_backend, or the
// test to close them first.
//
// # Use in your own tests
//
// Call Main from TestMain, so that a server this package started is stopped
// when the tests end:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Then, in a test:
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		pool := pgtest.NewDB(t) // migrated, private to this test
//		// ... use pool; it is closed and the database dropped when t ends.
//	}
//
// Use NewURL to open connections yourself, and NewEmptyDB to test
// migrations on a database without the docket schema.
package pgtest
