package pgtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
)

// Explain runs query with args under EXPLAIN (ANALYZE, COSTS OFF) in a
// transaction begun on b and rolled back, so what the statement writes or
// locks is undone, and returns the plan, one node per line, with the rows
// each node really produced. It is how a test shows that a sweep is a range
// scan: assert the index it must use, with the rows it must read, and no
// "Seq Scan". It stops the test with t.Fatal if the statement fails.
func Explain(t testing.TB, b db.Beginner, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	var plan []string
	err := db.WithTx(ctx, b, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+query, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("pgtest: explain %s: %v", query, err)
	}
	return strings.Join(plan, "\n")
}

// errRollback ends Explain's transaction: it only looks.
var errRollback = errors.New("explained: rolled back")
