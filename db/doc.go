// Package db is docket's connection to PostgreSQL: opening a pool, applying
// the schema, running work in a transaction, reading the time, and turning
// the database's refusals into errors a caller can test.
//
// # Schema
//
// [Migrate] applies River's migration line, then docket's own goose
// migrations (embedded from sql/schema: tables, types, indexes, constraints,
// seed rows), then docket's definitions (embedded from sql/definitions: every
// function, trigger and view in its current form, with the privileges), in
// one transaction, whenever they differ from the ones the database has, into
// the Postgres schema docket. It is idempotent and safe to call from several
// processes at once, and it refuses ([ErrSchemaTooNew]) a database that is
// ahead of this build without touching it. [MigrationStatus] reports where a
// database stands, [MigrateDownTo] rolls docket's migrations back, and
// [DefinitionsSQL] is the definitions' SQL for a migration tool of one's own.
//
// # Transactions
//
// Every docket write takes a [DBTX]: a *pgxpool.Pool, a *pgx.Conn or the
// caller's pgx.Tx. Passed a transaction, docket's writes commit or roll back
// with the caller's own. [WithTx] runs a function in a transaction, or in a
// savepoint when given one.
//
// # Time
//
// Storage never decides by the wall clock: every function that decides by
// time takes the caller's now, which docket's Go code reads from a [Clock].
// [SystemClock] is the wall clock; [FakeClock] moves only when a test says so.
// The database reads its own clock once, to bound the caller's: for a login
// that is not a member of the group role docket_clock (nor the schema's
// owner), a now further than the clock_skew setting of docket.settings (a
// minute by default) from the start of the transaction is refused with
// [ErrClockSkew]. A fake clock therefore needs a login in docket_clock.
//
// # Errors
//
// Functions in schema docket raise SQLSTATE class DK. [Translate] maps each
// code, and Postgres' unique, check, foreign-key and no-rows conditions, to a
// sentinel such as [ErrIllegalTransition] or [ErrInvalidArgument], wrapped in
// an [*Error] that names the operation and the ids involved. The full
// catalogue is [Catalogue], docs/errors.md and the table docket.error_codes.
package db
