// Package setup tests what make test and make demo do to the machine they
// run on: they start a private PostgreSQL cluster of their own, and leave
// every cluster they did not create as it was (its status, its
// pg_postmaster_start_time() and its max_connections).
//
// Its test needs root and Debian's postgresql-common (pg_lsclusters,
// pg_createcluster), since the clusters it watches are the machine's
// packaged ones, and it makes one of those of its own, so that there is
// always a running cluster to watch. Elsewhere it says so and skips; CI
// runs it.
package setup
