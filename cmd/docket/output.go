package main

import (
	"encoding/json"
	"time"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/lanes"
	"github.com/docket-dev/docket/projects"
	"github.com/docket-dev/docket/schedules"
	"github.com/docket-dev/docket/tasks"
)

// The JSON documents of the read commands' --output json. Their field names
// are part of docket's interface (docs/operators.md, "Machine-readable
// output"): add fields, never rename or remove one. Instants are RFC 3339
// in UTC; an instant that has not happened is null. Claim tokens, which
// would let a reader act as the claim's holder, are never printed.

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}

// instant is t in UTC, or nil when zero.
func instant(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// rawOrNull is a JSON value as it is, or null when absent.
func rawOrNull(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage("null")
	}
	return m
}

func strings0(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type (
	statusDoc struct {
		Docket  versionPair     `json:"docket"`
		River   versionPair     `json:"river"`
		State   string          `json:"state"`
		Pending []migrationJSON `json:"pending"`
		// Definitions compares the definitions the database last had
		// applied with this build's.
		Definitions definitionsJSON `json:"definitions"`
		Roles       *rolesJSON      `json:"roles"`
		Tables      []tableJSON     `json:"tables"`
		// BrokenSchedules are the schedules the sweep could not plan, as
		// far as the login may see them (docket.schedules_broken).
		BrokenSchedules []brokenScheduleJSON `json:"broken_schedules"`
		// PausedQueues are the paused queues the login may see
		// (docket.queues_paused).
		PausedQueues []pausedQueueJSON `json:"paused_queues"`
	}
	pausedQueueJSON struct {
		Project  string    `json:"project"`
		Queue    string    `json:"queue"`
		PausedBy string    `json:"paused_by"`
		PausedAt time.Time `json:"paused_at"`
		Reason   string    `json:"reason"`
	}
	brokenScheduleJSON struct {
		ID       int64     `json:"id"`
		Project  string    `json:"project"`
		Name     string    `json:"name"`
		BrokenAt time.Time `json:"broken_at"`
		Reason   string    `json:"reason"`
	}
	definitionsJSON struct {
		Applied string                 `json:"applied"`
		Latest  string                 `json:"latest"`
		Changes []definitionChangeJSON `json:"changes"`
	}
	definitionChangeJSON struct {
		File   string `json:"file"`
		Change string `json:"change"`
	}
	versionPair struct {
		Version int64 `json:"version"`
		Latest  int64 `json:"latest"`
	}
	migrationJSON struct {
		Line    string `json:"line"`
		Version int64  `json:"version"`
		Name    string `json:"name"`
	}
	rolesJSON struct {
		Present []string `json:"present"`
		Missing []string `json:"missing"`
	}
	tableJSON struct {
		Table string `json:"table"`
		Rows  int64  `json:"rows"`
	}

	versionDoc struct {
		Docket             string `json:"docket"`
		SchemaVersion      int64  `json:"schema_version"`
		SchemaFingerprint  string `json:"schema_fingerprint"`
		River              string `json:"river"`
		RiverSchemaVersion int    `json:"river_schema_version"`
	}

	projectListDoc struct {
		Projects []projectJSON `json:"projects"`
	}
	projectJSON struct {
		ID        int64           `json:"id"`
		Name      string          `json:"name"`
		Status    projects.Status `json:"status"`
		CreatedBy access.Actor    `json:"created_by"`
		CreatedAt time.Time       `json:"created_at"`
		UpdatedAt time.Time       `json:"updated_at"`
	}

	grantsDoc struct {
		Project string      `json:"project"`
		Grants  []grantJSON `json:"grants"`
	}
	grantJSON struct {
		Principal  access.Actor      `json:"principal"`
		Capability access.Capability `json:"capability"`
		GrantedBy  access.Actor      `json:"granted_by"`
		GrantedAt  time.Time         `json:"granted_at"`
	}

	bindingsDoc struct {
		Bindings []bindingJSON `json:"bindings"`
	}
	bindingJSON struct {
		Role      string       `json:"role"`
		Principal access.Actor `json:"principal"`
		BoundBy   access.Actor `json:"bound_by"`
		BoundAt   time.Time    `json:"bound_at"`
	}
)

func projectOf(p projects.Project) projectJSON {
	return projectJSON{ID: p.ID, Name: p.Name, Status: p.Status, CreatedBy: p.CreatedBy, CreatedAt: p.CreatedAt.UTC(),
		UpdatedAt: p.UpdatedAt.UTC()}
}

func grantOf(r access.Record) grantJSON {
	return grantJSON{Principal: r.Principal, Capability: r.Capability, GrantedBy: r.GrantedBy, GrantedAt: r.GrantedAt.UTC()}
}

func bindingOf(b access.Binding) bindingJSON {
	return bindingJSON{Role: b.Role, Principal: b.Principal, BoundBy: b.BoundBy, BoundAt: b.BoundAt.UTC()}
}

// Jobs.
type (
	// jobCensusDoc is a project's jobs by queue and state: at most per_state
	// of each state are counted; capped lists the states that reached it.
	jobCensusDoc struct {
		Project  string           `json:"project"`
		PerState int              `json:"per_state"`
		Capped   []jobs.State     `json:"capped"`
		Cells    []censusCellJSON `json:"cells"`
	}
	censusCellJSON struct {
		Queue string     `json:"queue"`
		State jobs.State `json:"state"`
		Jobs  int        `json:"jobs"`
	}
	jobListDoc struct {
		Project string    `json:"project"`
		Jobs    []jobJSON `json:"jobs"`
	}
	// jobJSON is a job without its payload and result.
	jobJSON struct {
		ID              int64        `json:"id"`
		Project         string       `json:"project"`
		Kind            string       `json:"kind"`
		Queue           string       `json:"queue"`
		Priority        int          `json:"priority"`
		State           jobs.State   `json:"state"`
		Attempts        int          `json:"attempts"`
		MaxAttempts     int          `json:"max_attempts"`
		AvailableAt     time.Time    `json:"available_at"`
		LaneID          int64        `json:"lane_id"`
		CaseID          int64        `json:"case_id"`
		IdempotencyKey  string       `json:"idempotency_key"`
		ClaimedBy       access.Actor `json:"claimed_by"`
		LeaseExpiresAt  *time.Time   `json:"lease_expires_at"`
		LeaseGeneration int64        `json:"lease_generation"`
		CreatedBy       access.Actor `json:"created_by"`
		CreatedAt       time.Time    `json:"created_at"`
		UpdatedAt       time.Time    `json:"updated_at"`
		FinishedAt      *time.Time   `json:"finished_at"`
		ClaimedRevision string       `json:"claimed_revision"`
		Revisions       []string     `json:"revisions"`
		// RetryOf is the finished job this one retries; 0 when none.
		RetryOf int64 `json:"retry_of"`
	}
	jobDetailJSON struct {
		jobJSON
		PayloadSchema    int             `json:"payload_schema"`
		Payload          json.RawMessage `json:"payload"`
		Params           json.RawMessage `json:"params"`
		Result           json.RawMessage `json:"result"`
		Diagnostic       string          `json:"diagnostic"`
		CompensationKind string          `json:"compensation_kind"`
		External         bool            `json:"external"`
		Repeatable       bool            `json:"repeatable"`
		Inputs           []string        `json:"inputs"`
		Output           outputJSON      `json:"output"`
	}
	outputJSON struct {
		Asset string `json:"asset"`
		Kind  string `json:"kind"`
		Root  string `json:"root"`
	}
	// completionJSON is a succeeded job's completion record: what its worker
	// produced and used. Recorded is false for a job completed without one.
	completionJSON struct {
		Recorded   bool            `json:"recorded"`
		Output     outputJSON      `json:"output"`
		Params     json.RawMessage `json:"params"`
		Inputs     []string        `json:"inputs"`
		RecordedBy access.Actor    `json:"recorded_by"`
		RecordedAt *time.Time      `json:"recorded_at"`
	}
	jobShowDoc struct {
		Job          jobDetailJSON    `json:"job"`
		History      []jobEventJSON   `json:"history"`
		Verification verificationJSON `json:"verification"`
		// Completion is null unless the job succeeded.
		Completion *completionJSON `json:"completion"`
		// Retries are the ids of the jobs that retry this one, oldest first.
		Retries []int64 `json:"retries"`
	}
	jobEventJSON struct {
		Seq      int          `json:"seq"`
		At       time.Time    `json:"at"`
		From     jobs.State   `json:"from"`
		To       jobs.State   `json:"to"`
		Actor    access.Actor `json:"actor"`
		Attempt  int          `json:"attempt"`
		Detail   string       `json:"detail"`
		Revision string       `json:"revision"`
		// The claim of the attempt the event ends; empty on other events.
		ClaimedBy access.Actor `json:"claimed_by"`
		ClaimedAt *time.Time   `json:"claimed_at"`
	}
	verificationJSON struct {
		OK      bool   `json:"ok"`
		Events  int    `json:"events"`
		BadSeq  int    `json:"bad_seq"`
		Problem string `json:"problem"`
	}
)

func jobCensusDocOf(c jobs.Census) jobCensusDoc {
	return jobCensusDoc{Project: c.Project, PerState: c.PerState, Capped: nonNil(c.Capped),
		Cells: mapSlice(c.Cells, func(cell jobs.CensusCell) censusCellJSON {
			return censusCellJSON{Queue: cell.Queue, State: cell.State, Jobs: cell.Jobs}
		})}
}

func jobOf(j jobs.Job) jobJSON {
	return jobJSON{ID: j.ID, Project: j.Project, Kind: j.Kind, Queue: j.Queue, Priority: j.Priority, State: j.State,
		Attempts: j.Attempts, MaxAttempts: j.MaxAttempts, AvailableAt: j.AvailableAt.UTC(), LaneID: j.LaneID,
		CaseID: j.CaseID, IdempotencyKey: j.IdempotencyKey, ClaimedBy: j.ClaimedBy, LeaseExpiresAt: instant(j.LeaseExpiresAt),
		LeaseGeneration: j.LeaseGeneration, CreatedBy: j.CreatedBy, CreatedAt: j.CreatedAt.UTC(),
		UpdatedAt: j.UpdatedAt.UTC(), FinishedAt: instant(j.FinishedAt), ClaimedRevision: j.ClaimedRevision,
		Revisions: j.Revisions, RetryOf: j.RetryOf}
}

func jobDetailOf(j jobs.Job) jobDetailJSON {
	return jobDetailJSON{jobJSON: jobOf(j), PayloadSchema: j.PayloadSchema, Payload: rawOrNull(j.Payload),
		Params: rawOrNull(j.Params), Result: rawOrNull(j.Result), Diagnostic: j.Diagnostic,
		CompensationKind: j.CompensationKind, External: j.External, Repeatable: j.Repeatable,
		Inputs: nonNil(j.Inputs), Output: outputOf(j.Output)}
}

func outputOf(o jobs.OutputRef) outputJSON {
	return outputJSON{Asset: o.Asset, Kind: o.Kind, Root: o.Root}
}

func completionOf(p *jobs.RerunPlan) *completionJSON {
	if p == nil {
		return nil
	}
	c := &completionJSON{Recorded: p.Recorded, Output: outputOf(p.Produced), Params: rawOrNull(p.Params),
		Inputs: nonNil(p.Inputs), RecordedBy: p.RecordedBy}
	if p.Recorded {
		c.RecordedAt = instant(p.RecordedAt)
	}
	return c
}

func jobEventOf(e jobs.Event) jobEventJSON {
	out := jobEventJSON{Seq: e.Seq, At: e.At.UTC(), From: e.From, To: e.To, Actor: e.Actor, Attempt: e.Attempt, Detail: e.Detail,
		Revision: e.Revision, ClaimedBy: e.ClaimedBy}
	if e.EndsAttempt() {
		at := e.ClaimedAt.UTC()
		out.ClaimedAt = &at
	}
	return out
}

// Lanes.
type (
	laneListDoc struct {
		Lanes []laneJSON `json:"lanes"`
	}
	laneJSON struct {
		ID          int64        `json:"id"`
		Project     string       `json:"project"`
		QuorumID    int64        `json:"quorum_id"`
		Quorum      string       `json:"quorum"`
		Conductor   access.Actor `json:"conductor"`
		Name        string       `json:"name"`
		Branch      string       `json:"branch"`
		Assignee    access.Actor `json:"assignee"`
		Task        string       `json:"task"`
		DependsOn   []int64      `json:"depends_on"`
		State       lanes.State  `json:"state"`
		Review      lanes.Review `json:"review"`
		MergeCommit string       `json:"merge_commit"`
		MergedAt    *time.Time   `json:"merged_at"`
		MergedBy    access.Actor `json:"merged_by"`
		CreatedBy   access.Actor `json:"created_by"`
		CreatedAt   time.Time    `json:"created_at"`
		UpdatedAt   time.Time    `json:"updated_at"`
	}
	laneShowDoc struct {
		Lane    laneJSON        `json:"lane"`
		History []laneEventJSON `json:"history"`
		// Jobs are the lane's first jobs; MoreJobs says others follow.
		Jobs     []laneJobJSON `json:"jobs"`
		MoreJobs bool          `json:"more_jobs"`
	}
	laneJobJSON struct {
		ID          int64      `json:"id"`
		Kind        string     `json:"kind"`
		Queue       string     `json:"queue"`
		State       jobs.State `json:"state"`
		Attempts    int        `json:"attempts"`
		MaxAttempts int        `json:"max_attempts"`
		CreatedAt   time.Time  `json:"created_at"`
		UpdatedAt   time.Time  `json:"updated_at"`
	}
	laneEventJSON struct {
		At     time.Time       `json:"at"`
		Type   lanes.EventType `json:"type"`
		From   string          `json:"from"`
		To     string          `json:"to"`
		Actor  access.Actor    `json:"actor"`
		Detail string          `json:"detail"`
	}
)

func laneOf(l lanes.Lane) laneJSON {
	deps := l.DependsOn
	if deps == nil {
		deps = []int64{}
	}
	return laneJSON{ID: l.ID, Project: l.Project, QuorumID: l.QuorumID, Quorum: l.Quorum, Conductor: l.Conductor,
		Name: l.Name, Branch: l.Branch, Assignee: l.Assignee, Task: l.Task, DependsOn: deps, State: l.State,
		Review: l.Review, MergeCommit: l.MergeCommit, MergedAt: instant(l.MergedAt), MergedBy: l.MergedBy,
		CreatedBy: l.CreatedBy, CreatedAt: l.CreatedAt.UTC(), UpdatedAt: l.UpdatedAt.UTC()}
}

func laneJobOf(j lanes.JobRef) laneJobJSON {
	return laneJobJSON{ID: j.ID, Kind: j.Kind, Queue: j.Queue, State: j.State, Attempts: j.Attempts,
		MaxAttempts: j.MaxAttempts, CreatedAt: j.CreatedAt.UTC(), UpdatedAt: j.UpdatedAt.UTC()}
}

func laneEventOf(e lanes.Event) laneEventJSON {
	return laneEventJSON{At: e.At.UTC(), Type: e.Type, From: e.From, To: e.To, Actor: e.Actor, Detail: e.Detail}
}

// Cases, their waits and dead letters.
type (
	caseListDoc struct {
		Cases []caseJSON `json:"cases"`
	}
	// caseJSON is a case without its state, which is the application's:
	// StateBytes says how large it is.
	caseJSON struct {
		ID         int64        `json:"id"`
		Project    string       `json:"project"`
		Kind       string       `json:"kind"`
		Status     cases.Status `json:"status"`
		Version    int64        `json:"version"`
		StateBytes int          `json:"state_bytes"`
		CreatedBy  access.Actor `json:"created_by"`
		CreatedAt  time.Time    `json:"created_at"`
		UpdatedAt  time.Time    `json:"updated_at"`
		ClosedAt   *time.Time   `json:"closed_at"`
	}
	caseShowDoc struct {
		Case        caseJSON         `json:"case"`
		Keys        []keyClaimJSON   `json:"keys"`
		Obligations []obligationJSON `json:"obligations"`
		History     []caseEventJSON  `json:"history"`
	}
	keyJSON struct {
		Namespace string `json:"namespace"`
		Value     string `json:"value"`
	}
	keyClaimJSON struct {
		keyJSON
		ClaimedAt  time.Time  `json:"claimed_at"`
		ReleasedAt *time.Time `json:"released_at"`
	}
	obligationJSON struct {
		ID              int64                 `json:"id"`
		Name            string                `json:"name"`
		State           cases.ObligationState `json:"state"`
		Due             time.Time             `json:"due"`
		Rule            string                `json:"rule"`
		CalendarDigest  string                `json:"calendar_digest"`
		EscalationKind  string                `json:"escalation_kind"`
		EscalationJobID int64                 `json:"escalation_job_id"`
		CreatedBy       access.Actor          `json:"created_by"`
		CreatedAt       time.Time             `json:"created_at"`
		ResolvedAt      *time.Time            `json:"resolved_at"`
		ResolvedBy      access.Actor          `json:"resolved_by"`
	}
	caseEventJSON struct {
		At     time.Time       `json:"at"`
		Type   cases.EventType `json:"type"`
		From   string          `json:"from"`
		To     string          `json:"to"`
		Actor  access.Actor    `json:"actor"`
		Detail json.RawMessage `json:"detail"`
	}

	waitsDoc struct {
		Project string     `json:"project"`
		Waits   []waitJSON `json:"waits"`
	}
	waitJSON struct {
		ID                int64            `json:"id"`
		CaseID            int64            `json:"case_id"`
		Project           string           `json:"project"`
		Name              string           `json:"name"`
		Keys              []keyJSON        `json:"keys"`
		Deadline          time.Time        `json:"deadline"`
		Status            cases.WaitStatus `json:"status"`
		OnArrival         string           `json:"on_arrival"`
		OnTimeout         string           `json:"on_timeout"`
		SatisfiedBy       int64            `json:"satisfied_by"`
		ContinuationJobID int64            `json:"continuation_job_id"`
		CreatedBy         access.Actor     `json:"created_by"`
		CreatedAt         time.Time        `json:"created_at"`
		SettledAt         *time.Time       `json:"settled_at"`
		SettledBy         access.Actor     `json:"settled_by"`
	}

	deadLettersDoc struct {
		Project     string           `json:"project"`
		DeadLetters []deadLetterJSON `json:"dead_letters"`
	}
	// deadLetterJSON is a dead letter without its payload, which is its
	// producer's.
	deadLetterJSON struct {
		ID             int64     `json:"id"`
		Producer       string    `json:"producer"`
		MessageID      string    `json:"message_id"`
		Keys           []keyJSON `json:"keys"`
		Addressee      int64     `json:"addressee"`
		Reason         string    `json:"reason"`
		ArrivedAt      time.Time `json:"arrived_at"`
		DeadLetteredAt time.Time `json:"dead_lettered_at"`
	}
)

func caseOf(k cases.Case) caseJSON {
	return caseJSON{ID: k.ID, Project: k.Project, Kind: k.Kind, Status: k.Status, Version: k.Version,
		StateBytes: len(k.State), CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt.UTC(), UpdatedAt: k.UpdatedAt.UTC(),
		ClosedAt: instant(k.ClosedAt)}
}

func keyOf(k cases.Key) keyJSON { return keyJSON{Namespace: k.Namespace, Value: k.Value} }

func keyClaimOf(k cases.KeyClaim) keyClaimJSON {
	return keyClaimJSON{keyJSON: keyOf(k.Key), ClaimedAt: k.ClaimedAt.UTC(), ReleasedAt: instant(k.ReleasedAt)}
}

func obligationOf(o cases.Obligation) obligationJSON {
	j := obligationJSON{ID: o.ID, Name: o.Name, State: o.State, Due: o.Due.UTC(), Rule: o.Rule,
		CalendarDigest: o.CalendarDigest, EscalationJobID: o.EscalationJobID, CreatedBy: o.CreatedBy,
		CreatedAt: o.CreatedAt.UTC(), ResolvedAt: instant(o.ResolvedAt), ResolvedBy: o.ResolvedBy}
	if o.Escalation != nil {
		j.EscalationKind = o.Escalation.Kind
	}
	return j
}

func caseEventOf(e cases.Event) caseEventJSON {
	return caseEventJSON{At: e.At.UTC(), Type: e.Type, From: e.From, To: e.To, Actor: e.Actor, Detail: rawOrNull(e.Detail)}
}

func waitOf(w cases.Wait) waitJSON {
	j := waitJSON{ID: w.ID, CaseID: w.CaseID, Project: w.Project, Name: w.Name, Keys: mapSlice(w.Keys, keyOf),
		Deadline: w.Deadline.UTC(), Status: w.Status, OnArrival: w.OnArrival.Kind, SatisfiedBy: w.SatisfiedBy,
		ContinuationJobID: w.ContinuationJobID, CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt.UTC(),
		SettledAt: instant(w.SettledAt), SettledBy: w.SettledBy}
	if w.OnTimeout != nil {
		j.OnTimeout = w.OnTimeout.Kind
	}
	return j
}

func deadLetterOf(m cases.DeadLetter) deadLetterJSON {
	return deadLetterJSON{ID: m.ID, Producer: m.Producer, MessageID: m.MessageID, Keys: mapSlice(m.Keys, keyOf),
		Addressee: m.Addressee, Reason: m.Reason, ArrivedAt: m.ArrivedAt.UTC(), DeadLetteredAt: m.DeadLetteredAt.UTC()}
}

// Schedules.
type (
	scheduleListDoc struct {
		Schedules []scheduleJSON `json:"schedules"`
	}
	scheduleJSON struct {
		ID             int64             `json:"id"`
		Project        string            `json:"project"`
		Name           string            `json:"name"`
		Cron           string            `json:"cron"`
		Zone           string            `json:"zone"`
		FixedTime      bool              `json:"fixed_time"`
		JobKind        string            `json:"job_kind"`
		JobQueue       string            `json:"job_queue"`
		CatchUp        schedules.CatchUp `json:"catch_up"`
		MaxCatchUp     int               `json:"max_catch_up"`
		GraceSeconds   float64           `json:"grace_seconds"`
		Start          time.Time         `json:"start"`
		End            *time.Time        `json:"end"`
		MaxOccurrences int64             `json:"max_occurrences"`
		// UnboundedReason is why a schedule with neither end nor
		// max_occurrences runs forever; null for a bounded one.
		UnboundedReason *string          `json:"unbounded_reason"`
		Runs            int64            `json:"runs"`
		Status          schedules.Status `json:"status"`
		// BrokenReason and BrokenAt: why and since when the sweep cannot
		// plan a broken schedule; null otherwise.
		BrokenReason *string    `json:"broken_reason"`
		BrokenAt     *time.Time `json:"broken_at"`
		Cursor       *time.Time `json:"cursor"`
		NextDue      *time.Time `json:"next_due"`
		CreatedBy    string     `json:"created_by"`
		CreatedAt    time.Time  `json:"created_at"`
		UpdatedAt    time.Time  `json:"updated_at"`
		FinishedAt   *time.Time `json:"finished_at"`
	}
	previewDoc struct {
		Zone        string           `json:"zone"`
		Occurrences []occurrenceJSON `json:"occurrences"`
	}
	// occurrenceJSON is one occurrence: its wall-clock time in the zone
	// (no offset), its fold (1 for the second pass of a repeated hour) and
	// its instant.
	occurrenceJSON struct {
		Local string    `json:"local"`
		Fold  int       `json:"fold"`
		At    time.Time `json:"at"`
	}
)

func scheduleOf(s schedules.Schedule) scheduleJSON {
	return scheduleJSON{ID: s.ID, Project: s.Project, Name: s.Name, Cron: s.Cron, Zone: s.Zone, FixedTime: s.FixedTime,
		JobKind: s.Job.Kind, JobQueue: s.Job.Queue, CatchUp: s.CatchUp, MaxCatchUp: s.MaxCatchUp,
		GraceSeconds: s.Grace.Seconds(), Start: s.Start.UTC(), End: instant(s.End), MaxOccurrences: s.MaxOccurrences,
		UnboundedReason: orNull(s.UnboundedReason), Runs: s.Runs, Status: s.Status,
		BrokenReason: orNull(s.BrokenReason), BrokenAt: instant(s.BrokenAt), Cursor: instant(s.Cursor), NextDue: instant(s.NextDue), CreatedBy: s.CreatedBy,
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC(), FinishedAt: instant(s.FinishedAt)}
}

// orNull is s, or null when it is empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func occurrenceOf(o schedules.Occurrence) occurrenceJSON {
	return occurrenceJSON{Local: o.Local.Format("2006-01-02T15:04:05"), Fold: o.Fold, At: o.At.UTC()}
}

// Tasks.
type (
	taskListDoc struct {
		Project string     `json:"project"`
		Tasks   []taskJSON `json:"tasks"`
	}
	// taskJSON is a task as the worklist shows it.
	taskJSON struct {
		ID        int64        `json:"id"`
		Project   string       `json:"project"`
		CaseID    int64        `json:"case_id"`
		Key       string       `json:"key"`
		Title     string       `json:"title"`
		Status    tasks.Status `json:"status"`
		Deadline  time.Time    `json:"deadline"`
		ClaimedBy access.Actor `json:"claimed_by"`
		ClaimedTo *time.Time   `json:"claimed_until"`
	}
	taskDetailJSON struct {
		taskJSON
		Summary      string              `json:"summary"`
		Proposal     json.RawMessage     `json:"proposal"`
		Evidence     json.RawMessage     `json:"evidence"`
		Decisions    []string            `json:"decisions"`
		Audience     []access.Actor      `json:"audience"`
		AudienceCaps []access.Capability `json:"audience_caps"`
		Proposer     access.Actor        `json:"proposer"`
		ActingFor    []access.Actor      `json:"acting_for"`
		Excluded     []access.Actor      `json:"excluded"`
		Expiry       expiryJSON          `json:"expiry"`
		WaitID       int64               `json:"wait_id"`
		Decision     string              `json:"decision"`
		DecidedBy    access.Actor        `json:"decided_by"`
		Automatic    bool                `json:"automatic"`
		Note         string              `json:"note"`
		SettledAt    *time.Time          `json:"settled_at"`
		EscalatedAt  *time.Time          `json:"escalated_at"`
		OpenedBy     access.Actor        `json:"opened_by"`
		OpenedAt     time.Time           `json:"opened_at"`
		UpdatedAt    time.Time           `json:"updated_at"`
	}
	// expiryJSON is what a task's deadline does: decide automatically
	// (Decision), or escalate to principals and holders of capabilities,
	// then be due ThenDueSeconds later.
	expiryJSON struct {
		Decision       string              `json:"decision"`
		EscalateTo     []access.Actor      `json:"escalate_to"`
		EscalateCaps   []access.Capability `json:"escalate_caps"`
		ThenDueSeconds float64             `json:"then_due_seconds"`
	}
	taskShowDoc struct {
		Task    taskDetailJSON  `json:"task"`
		History []taskEventJSON `json:"history"`
	}
	taskEventJSON struct {
		At     time.Time       `json:"at"`
		What   string          `json:"what"`
		Actor  access.Actor    `json:"actor"`
		Detail json.RawMessage `json:"detail"`
	}
)

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func taskOf(t tasks.Task, now time.Time) taskJSON {
	j := taskJSON{ID: t.ID, Project: t.Project, CaseID: t.CaseID, Key: t.Key, Title: t.Title, Status: t.Status,
		Deadline: t.Deadline.UTC()}
	if liveClaim(t, now) {
		j.ClaimedBy, j.ClaimedTo = t.Claim.Holder, instant(t.Claim.Until)
	}
	return j
}

func taskDetailOf(t tasks.Task, now time.Time) taskDetailJSON {
	var exp expiryJSON
	if d, ok := t.Expiry.Automatic(); ok {
		exp.Decision = d
	} else {
		to, caps, after := t.Expiry.EscalatesTo()
		exp.EscalateTo, exp.EscalateCaps, exp.ThenDueSeconds = to, caps, after.Seconds()
	}
	exp.EscalateTo, exp.EscalateCaps = nonNil(exp.EscalateTo), nonNil(exp.EscalateCaps)
	var settled, escalated *time.Time
	if t.SettledAt != nil {
		settled = instant(*t.SettledAt)
	}
	if t.EscalatedAt != nil {
		escalated = instant(*t.EscalatedAt)
	}
	return taskDetailJSON{taskJSON: taskOf(t, now), Summary: t.Summary, Proposal: rawOrNull(t.Proposal),
		Evidence: rawOrNull(t.Evidence), Decisions: strings0(t.Decisions), Audience: nonNil(t.Audience),
		AudienceCaps: nonNil(t.AudienceCaps), Proposer: t.Proposer, ActingFor: nonNil(t.ActingFor),
		Excluded: nonNil(t.Excluded), Expiry: exp, WaitID: t.WaitID, Decision: t.Decision, DecidedBy: t.DecidedBy,
		Automatic: t.Automatic, Note: t.Note, SettledAt: settled, EscalatedAt: escalated, OpenedBy: t.OpenedBy,
		OpenedAt: t.OpenedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()}
}

func taskEventOf(e tasks.Event) taskEventJSON {
	return taskEventJSON{At: e.At.UTC(), What: e.What, Actor: e.Actor, Detail: rawOrNull(e.Detail)}
}
