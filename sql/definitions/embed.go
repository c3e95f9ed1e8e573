// Package definitions holds docket's code in SQL: every function, trigger and
// view, with the API functions' list and the privileges, one file per
// aggregate, each object written once in its current form. Apply them with
// db.Migrate, never by hand: it applies them after the versioned migrations
// of sql/schema, in the order of [Order], in one transaction, and records
// what they made, so that what a later build no longer names is dropped.
package definitions

import "embed"

// FS holds the definition files.
//
//go:embed *.sql
var FS embed.FS

// Order is the order the files of [FS] that make functions, triggers and
// views are applied in: each stands on those before it (a view on the
// functions it calls, a trigger on its function). kit.sql comes first.
var Order = []string{
	"kit.sql",
	"projects.sql",
	"access.sql",
	"jobs.sql",
	"queues.sql",
	"lanes.sql",
	"cases.sql",
	"waits.sql",
	"schedules.sql",
	"retention.sql",
	"tasks.sql",
	"plans.sql",
	"batches.sql",
	"budgets.sql",
}

// Privileges is the file applied last, once the files of [Order] are applied
// and what they no longer make is dropped: the trust model applied to all
// they made. It makes no function, trigger or view of its own.
const Privileges = "privileges.sql"
