package db_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/integration/pgtest"
)

// databaseURL stands in for your service's configuration: in these examples
// it is a fresh database made for the example.
func databaseURL(migrated bool) string {
	url, err := pgtest.Scratch(context.Background(), migrated)
	if err != nil {
		log.Fatal(err)
	}
	return url
}

func ExampleMigrate() {
	ctx := context.Background()
	pool, err := db.Open(ctx, databaseURL(false))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// River's migrations, then docket's and its definitions; idempotent, safe to run concurrently.
	if err := db.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	status, err := db.MigrationStatus(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("current:", status.Current())
	// Output: current: true
}

func ExampleWithTx() {
	ctx := context.Background()
	pool, err := db.Open(ctx, databaseURL(true))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// The function's writes commit together, or not at all.
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT docket.project_create('acme', 'user:ana', '2026-11-02T09:00:00Z')`)
		if err != nil {
			return db.Translate(err, "project.create", "project", "acme")
		}
		_, err = tx.Exec(ctx, `SELECT docket.project_create('acme', 'user:ana', '2026-11-02T09:00:00Z')`)
		return db.Translate(err, "project.create", "project", "acme")
	})
	fmt.Println(errors.Is(err, db.ErrAlreadyExists))

	var projects int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM docket.projects`).Scan(&projects); err != nil {
		log.Fatal(err)
	}
	fmt.Println("projects:", projects)
	// Output:
	// true
	// projects: 0
}

func ExampleTranslate() {
	ctx := context.Background()
	pool, err := db.Open(ctx, databaseURL(true))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	_, err = pool.Exec(ctx, `SELECT docket.project_set_status('acme', 'archived', 'user:ana', '2026-11-02T09:00:00Z')`)
	err = db.Translate(err, "project.archive", "project", "acme")
	fmt.Println(errors.Is(err, db.ErrNotFound))
	fmt.Println(err)
	// Output:
	// true
	// project.archive project=acme: not found: project 'acme' does not exist [P0002]
}

func ExampleFakeClock() {
	clock := db.NewFakeClock(mustParse("2026-03-29T00:30:00Z"))
	fmt.Println(clock.Now())
	clock.Advance(90 * time.Minute)
	fmt.Println(clock.Now())
	// Output:
	// 2026-03-29 00:30:00 +0000 UTC
	// 2026-03-29 02:00:00 +0000 UTC
}
