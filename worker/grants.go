package worker

import (
	"context"
	"fmt"

	"github.com/docket-dev/docket/db"
)

// claimProjects returns the projects where the worker's actor holds
// job.claim, refusing with [db.ErrNotPermitted] when there are none: such a
// worker would start, claim nothing and say nothing, so [Client.Start]
// refuses it instead.
func (w *Client) claimProjects(ctx context.Context) ([]string, error) {
	const op = "worker.start"
	actor := w.cfg.Actor
	projects, err := queries.JobClaimProjects(ctx, w.pool, string(actor))
	if err != nil {
		return nil, db.Translate(err, op, "actor", actor)
	}
	if len(projects) == 0 {
		return nil, db.Refuse(db.ErrNotPermitted, op, fmt.Sprintf(
			"%s holds job.claim in no project, so this worker would claim nothing: grant it job.claim on the projects whose jobs it runs "+
				"(docket grant %s PROJECT job.claim, or access.Client.Allow), then start it", actor, actor), "actor", actor)
	}
	return projects, nil
}
