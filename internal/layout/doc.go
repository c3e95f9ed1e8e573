// Package layout holds no code, only tests that enforce the import
// boundaries and the API shape stated in docket's design:
//
//   - TestImportBoundaries: worker and jobs import no coordination package
//     (lanes, cases, schedules and what comes after), jobs does not import
//     worker, db imports no domain package, the query packages under
//     internal/dbsqlc import nothing of docket's, and cmd/docket links no
//     test helpers.
//   - TestQueryImports: each package imports only the generated query
//     packages queryImports gives it (its own aggregate's; the worker only
//     the jobs'), so that a package can call no other aggregate's queries;
//     it names each file that imports one it may not.
//   - TestAPIShape: no exported function takes a db.DBTX or a *pgx.Conn; one
//     that takes a pgx.Tx is named …Tx and has its pool form beside it (or
//     says why it has none); only constructors and a short, explained list
//     take a pool; interface methods taking a pgx.Tx are named …Tx.
//
// Each rule also has a test that feeds it a synthetic crossing or violation
// and shows the rule catches it.
package layout
