package main

import (
	"context"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// The console's reads that docket's clients have no call for yet: a job
// census, and the ids of a project's runs and batches. Each holds to the
// grants as the clients do: the census counts only when
// docket.job_visible, the predicate of every job read, lets the principal
// see the project's jobs; the lists read ids alone, and the console reads
// each run or batch through its client, as the principal, showing only
// those the database lets it see.

// consoleCensusCap is how many jobs of one state the census counts at
// most, so that it reads a bounded number of rows however large the
// project.
const consoleCensusCap = 10000

// censusCell is how many of a project's jobs are in one queue and state.
type censusCell struct {
	Queue string
	State jobs.State
	N     int64
}

// jobCensus counts project's jobs by queue and state, as who may see them:
// none when who holds no grant that shows it the project's jobs. It counts
// at most limit jobs of each state, from the index on (project, state);
// capped lists the states that have more, whose counts by queue are of the
// first limit only.
func jobCensus(ctx context.Context, q db.DBTX, who access.Actor, project string, limit int) (cells []censusCell, capped []jobs.State, err error) {
	states := make([]string, len(jobs.States))
	for i, s := range jobs.States {
		states[i] = string(s)
	}
	rows, err := q.Query(ctx, `
SELECT j.queue, s.state, count(*)
FROM unnest($3::text[]) AS s(state)
CROSS JOIN LATERAL (
    SELECT queue FROM docket.jobs
    WHERE project = $1 AND state = s.state AND docket.job_visible($2, $1)
    LIMIT $4
) j
GROUP BY j.queue, s.state ORDER BY j.queue, s.state`, project, string(who), states, limit)
	if err != nil {
		return nil, nil, db.Translate(err, "console.census", "project", project)
	}
	defer rows.Close()
	total := map[jobs.State]int64{}
	for rows.Next() {
		var c censusCell
		if err := rows.Scan(&c.Queue, &c.State, &c.N); err != nil {
			return nil, nil, db.Translate(err, "console.census", "project", project)
		}
		cells = append(cells, c)
		total[c.State] += c.N
	}
	if err := rows.Err(); err != nil {
		return nil, nil, db.Translate(err, "console.census", "project", project)
	}
	for _, s := range jobs.States {
		if total[s] >= int64(limit) {
			capped = append(capped, s)
		}
	}
	return cells, capped, nil
}

// runIDs lists the ids of up to limit of project's runs, newest first,
// those before id before (0: from the newest).
func runIDs(ctx context.Context, q db.DBTX, project string, before int64, limit int) ([]int64, error) {
	return ids(ctx, q, "console.runs", project, `
SELECT id FROM docket.runs WHERE project = $1 AND ($2::bigint = 0 OR id < $2) ORDER BY id DESC LIMIT $3`, before, limit)
}

// batchIDs lists the ids of up to limit of project's batches by name,
// those whose name sorts after after.
func batchIDs(ctx context.Context, q db.DBTX, project, after string, limit int) ([]int64, error) {
	return ids(ctx, q, "console.batches", project, `
SELECT id FROM docket.batches WHERE project = $1 AND name > $2 ORDER BY name LIMIT $3`, after, limit)
}

func ids(ctx context.Context, q db.DBTX, op, project, sql string, from any, limit int) ([]int64, error) {
	rows, err := q.Query(ctx, sql, project, from, limit)
	if err != nil {
		return nil, db.Translate(err, op, "project", project)
	}
	defer rows.Close()
	var list []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, db.Translate(err, op, "project", project)
		}
		list = append(list, id)
	}
	if err := rows.Err(); err != nil {
		return nil, db.Translate(err, op, "project", project)
	}
	return list, nil
}
