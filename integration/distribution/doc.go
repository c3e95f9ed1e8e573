// Package distribution counts what stands between docket's schema and a
// database distributed by project, such as Citus, in plain PostgreSQL: on a
// freshly migrated database it walks the catalog and each function's body,
// and compares what it finds with the record kept in its test. docs/scaling.md
// ("Distributed Postgres") says why each count matters and shows the figures.
//
// A table of schema docket is would-be distributed (by project) unless it is
// River's or one of the reference tables the test names: the small, global
// tables every node would hold a copy of (projects, grants, retention
// policies and actor bindings with their events, the machines, error codes,
// capabilities, the API list, job decoders, settings and docket's migration
// bookkeeping). Partitions are read through their table. What is counted:
//
//   - would-be distributed tables without a project column;
//   - unique indexes (primary keys and unique constraints among them) of
//     those tables whose key columns leave out project;
//   - foreign keys that reach a would-be distributed table and do not pair
//     the referencing table's project with the referenced one's;
//   - statement triggers with transition tables (REFERENCING OLD/NEW TABLE),
//     on any docket table;
//   - overloads of docket.api_functions without a p_project argument to
//     delegate the call by, but for the few that write global tables only;
//   - UPDATE statements (and the DO UPDATE of an upsert) in docket's
//     function bodies that call a volatile function, by a text scan of
//     prosrc: from the UPDATE to the next semicolon, comments left out, any
//     name of a volatile function of pg_catalog or docket followed by "(";
//   - functions whose bodies call what acts on one node only: pg_notify,
//     set_config, advisory locks, the current transaction's id.
//
// The record lists each count's offenders, so its figure is the list's
// length. The test fails when anything not in the record is found, naming
// it, and also when something in the record is gone, asking for it to be
// taken out and the figure in docs/scaling.md lowered: the record stays
// exact, and a figure can only be lowered on purpose. The package has tests
// only.
package distribution
