package db

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RecordDefinitionsMadeByHand records, as a build's Migrate would have, every
// function, trigger and view in schema docket (but River's and the versioned
// migrations' own) as made by definition file file: for a test that applied
// an older build's definition files by hand, so that the database is as that
// build's migrate left it.
func RecordDefinitionsMadeByHand(ctx context.Context, pool *pgxpool.Pool, file string) error {
	if _, err := pool.Exec(ctx, "SET search_path = pg_catalog;\n"+definitionsDDL+";\nRESET search_path"); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, `INSERT INTO `+definitionObjectsTable+` (kind, name, file)
		SELECT s.kind, s.name, $2 FROM (`+definitionsSnapshot+`) s
		WHERE s.kind <> 'function' OR substring(s.name FROM '^docket\.([a-z0-9_]+)\(') <> ALL ($1)
		ON CONFLICT DO NOTHING`, versionedFunctions(), file)
	return err
}
