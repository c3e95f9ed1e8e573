// Package schema holds docket's goose migrations, embedded so that a binary
// built from docket can migrate a database with no files beside it. Apply them
// with db.Migrate, never by hand: it also runs River's migration line first.
package schema

import "embed"

// FS holds the migrations, zero-padded and applied in order.
//
//go:embed *.sql
var FS embed.FS
