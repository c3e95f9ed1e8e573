package cases

import (
	"encoding/json"
	"time"

	"github.com/docket-dev/docket/access"
	dbsqlc "github.com/docket-dev/docket/internal/dbsqlc/cases"
)

// Status is whether a case is live. The legal moves are the rows of
// docket.case_transitions: open → closed ([Client.Close]) and closed → open
// ([Client.Reopen]).
type Status string

// The case statuses.
const (
	Open   Status = "open"   // live: its keys correlate, its state is written, it may owe things
	Closed Status = "closed" // settled: it owes nothing and holds no keys
)

// Statuses lists every case status.
var Statuses = []Status{Open, Closed}

// Case is a business matter as stored. Project and kind never change. State
// is the JSON last written with [Client.PutState], stored as given and never
// interpreted: treat it as untrusted input. Version counts the writes of
// State, starting at 1; each write names the version it read.
type Case struct {
	ID        int64
	Project   string
	Kind      string
	Status    Status
	State     json.RawMessage
	Version   int64
	CreatedBy access.Actor
	CreatedAt time.Time
	UpdatedAt time.Time
	ClosedAt  time.Time // zero while open
}

// Key is a correlation key: a business identifier such as (document,
// DOC-4711). While a case is open it holds its keys, and no other open case
// of the project holds any of them.
type Key struct {
	Namespace string // 1-63 characters of [a-z0-9._-], starting with a letter or digit
	Value     string // 1-255 characters, no control characters, no leading or trailing space
}

// KeyClaim is one claim of a key by a case: made at admission or reopening,
// released when the case closes.
type KeyClaim struct {
	Key
	ClaimedAt  time.Time
	ReleasedAt time.Time // zero while held
}

// Held reports whether the claim still holds its key.
func (k KeyClaim) Held() bool { return k.ReleasedAt.IsZero() }

// Snapshot is a case's state with the version it is at: what a writer
// passes back to [Client.PutState] as the version it read.
type Snapshot struct {
	State   json.RawMessage
	Version int64
}

// EventType names what a case [Event] records.
type EventType string

// The kinds of case events.
const (
	EventCreated     EventType = "created"      // the case was admitted (To "open"; Detail: kind)
	EventStatus      EventType = "status"       // it was closed or reopened (From, To)
	EventState       EventType = "state"        // its state was written (From, To: versions)
	EventKeyClaimed  EventType = "key_claimed"  // it claimed a key (Detail: namespace, value)
	EventKeyReleased EventType = "key_released" // it released a key when it closed
	EventObligation  EventType = "obligation"   // an obligation was registered (To "pending") or moved
	EventLateMeet    EventType = "late_meet"    // a breached obligation was met after all; the breach stands
	EventWait        EventType = "wait"         // a wait was registered (To "waiting") or ended (From, To; Detail: message, job)
	EventMessage     EventType = "message"      // a message addressed to the case was dead-lettered (Detail: reason)
	EventTimer       EventType = "timer"        // a timer was set (To "set") or cancelled by the close (To "cancelled")
)

// Event is one recorded change of a case or of something it holds. Detail
// is a JSON object naming what changed: the key, the obligation (its
// obligation_id, name, due_at …).
type Event struct {
	ID     int64
	CaseID int64
	Type   EventType
	From   string
	To     string
	Actor  access.Actor
	At     time.Time
	Detail json.RawMessage
}

func fromCaseRow(r *dbsqlc.DocketCase) Case {
	c := Case{
		ID: r.ID, Project: r.Project, Kind: r.Kind, Status: Status(r.Status), State: r.State, Version: r.Version,
		CreatedBy: access.Actor(r.CreatedBy), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if r.ClosedAt != nil {
		c.ClosedAt = r.ClosedAt.UTC()
	}
	return c
}

func fromKeyRow(r *dbsqlc.DocketCaseKey) KeyClaim {
	k := KeyClaim{Key: Key{Namespace: r.Namespace, Value: r.Value}, ClaimedAt: r.ClaimedAt.UTC()}
	if r.ReleasedAt != nil {
		k.ReleasedAt = r.ReleasedAt.UTC()
	}
	return k
}

func fromEventRow(r *dbsqlc.DocketCaseEvent) Event {
	e := Event{
		ID: r.ID, CaseID: r.CaseID, Type: EventType(r.What), Actor: access.Actor(r.Actor), At: r.At.UTC(),
		Detail: r.Detail,
	}
	if r.FromState != nil {
		e.From = *r.FromState
	}
	if r.ToState != nil {
		e.To = *r.ToState
	}
	return e
}

// keyArrays splits keys into the parallel arrays the database takes.
func keyArrays(keys []Key) (namespaces, values []string) {
	namespaces, values = make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		namespaces[i], values[i] = k.Namespace, k.Value
	}
	return namespaces, values
}
