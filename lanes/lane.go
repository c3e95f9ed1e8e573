package lanes

import (
	"time"

	"github.com/docket-dev/docket/access"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/lanes"
	"github.com/docket-dev/docket/jobs"
)

// State is where a lane's work stands: its execution axis. The legal moves
// are the rows of docket.lane_transitions:
//
//	open        → in_progress | cancelled
//	in_progress → done | failed | cancelled
//
// Done, failed and cancelled are terminal. Only the conductor of the lane's
// quorum moves it ([Client.SetState]).
type State string

// The execution states.
const (
	Open       State = "open"        // created; no work started
	InProgress State = "in_progress" // work under way
	Done       State = "done"        // finished; it may be merged once approved
	Failed     State = "failed"      // will not be finished
	Cancelled  State = "cancelled"   // withdrawn before it finished
)

// States lists every execution state, in the order of the machine.
var States = []State{Open, InProgress, Done, Failed, Cancelled}

// Terminal reports whether s is a state a lane never leaves.
func (s State) Terminal() bool { return s == Done || s == Failed || s == Cancelled }

// Review is where a lane's review stands. The legal moves are the rows of
// docket.lane_review_transitions:
//
//	none              → submitted
//	submitted         → approved | changes_requested
//	changes_requested → submitted
//
// Approved is final. The conductor or the assignee submits ([Client.Submit]);
// only the conductor approves or requests changes ([Client.Approve],
// [Client.RequestChanges]).
type Review string

// The review states.
const (
	NotSubmitted     Review = "none"              // not submitted for review
	Submitted        Review = "submitted"         // waiting for the conductor's verdict
	Approved         Review = "approved"          // approved by the conductor: final
	ChangesRequested Review = "changes_requested" // the conductor asked for changes; submit again
)

// Reviews lists every review state, in the order of the machine.
var Reviews = []Review{NotSubmitted, Submitted, Approved, ChangesRequested}

// Quorum is a group of lanes in one project under one conductor. A quorum
// never changes.
type Quorum struct {
	ID        int64
	Project   string
	Name      string
	Conductor access.Actor
	CreatedBy access.Actor
	CreatedAt time.Time
}

// Lane is a lane as stored, with its quorum's name and conductor and the
// lanes it depends on. Quorum, project, name, branch, assignee, task and
// dependencies never change.
type Lane struct {
	ID        int64
	QuorumID  int64
	Quorum    string // the quorum's name
	Project   string // the quorum's project
	Conductor access.Actor
	Name      string
	Branch    string
	Assignee  access.Actor
	Task      string  // the task reference, e.g. PROJ-123 or a URL
	DependsOn []int64 // lanes of the same quorum, each older than this one, ascending
	State     State
	Review    Review
	// The merge record: empty and zero until the merge is recorded.
	MergeCommit string
	MergedAt    time.Time
	MergedBy    access.Actor
	CreatedBy   access.Actor
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Merged reports whether the lane's merge is recorded.
func (l Lane) Merged() bool { return !l.MergedAt.IsZero() }

// EventType names what a lane [Event] records: which of its axes moved.
type EventType string

// The axes of a lane's history.
const (
	EventCreated    EventType = "created"    // the lane was created (To is "open")
	EventDependency EventType = "dependency" // it was given a dependency (To is the lane id it depends on)
	EventExecution  EventType = "execution"  // its [State] moved
	EventReview     EventType = "review"     // its [Review] moved
	EventMerge      EventType = "merge"      // its merge was recorded (From "unmerged", To "merged")
)

// Event is one recorded change of a lane. From is empty for a creation and a
// dependency. Detail is the note given with the change, or what the change
// recorded (the branch and assignee of a creation, the commit of a merge).
type Event struct {
	ID     int64
	LaneID int64
	Type   EventType
	From   string
	To     string
	Actor  access.Actor
	At     time.Time
	Detail string
}

// JobRef is one job of a lane as the lane's readers see it: where it stands,
// not what it carries.
type JobRef struct {
	ID          int64
	Kind        string
	Queue       string
	State       jobs.State
	Attempts    int
	MaxAttempts int
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func fromQuorumRow(r *dbsqlc.DocketQuorum) Quorum {
	return Quorum{
		ID: r.ID, Project: r.Project, Name: r.Name, Conductor: access.Actor(r.Conductor),
		CreatedBy: access.Actor(r.CreatedBy), CreatedAt: r.CreatedAt.UTC(),
	}
}

// fromRow converts a docket.lane_details row, the one row type every lane
// query and function returns.
func fromRow(r *dbsqlc.DocketLaneDetail) Lane {
	l := Lane{
		ID: r.ID, QuorumID: r.QuorumID, Quorum: r.Quorum, Project: r.Project, Conductor: access.Actor(r.Conductor),
		Name: r.Name, Branch: r.Branch, Assignee: access.Actor(r.Assignee), Task: r.TaskRef,
		DependsOn: r.DependsOn, State: State(r.State), Review: Review(r.Review),
		CreatedBy: access.Actor(r.CreatedBy), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if l.DependsOn == nil {
		l.DependsOn = []int64{}
	}
	if r.MergeCommit != nil {
		l.MergeCommit = *r.MergeCommit
	}
	if r.MergedAt != nil {
		l.MergedAt = r.MergedAt.UTC()
	}
	if r.MergedBy != nil {
		l.MergedBy = access.Actor(*r.MergedBy)
	}
	return l
}

func fromRows(rows []*dbsqlc.DocketLaneDetail) []Lane {
	out := make([]Lane, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out
}
