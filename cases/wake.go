package cases

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
)

// WakeReason says why a continuation job runs.
type WakeReason string

// The wake reasons.
const (
	WakeMessage WakeReason = "satisfied" // a message satisfied a wait
	WakeExpired WakeReason = "expired"   // a wait's deadline came first
	WakeTimer   WakeReason = "timer"     // a timer's instant came
)

// Wake is why a continuation job runs, read from the job itself: the
// recorded facts, never recomputed, so a job run late or again sees the same.
type Wake struct {
	Reason WakeReason
	CaseID int64
	// WaitID and Wait name the wait that ended, for WakeMessage and
	// WakeExpired.
	WaitID int64
	Wait   string
	// Deadline is the expired wait's deadline, for WakeExpired.
	Deadline time.Time
	// Message is the message that satisfied the wait, for WakeMessage.
	Message *ArrivedMessage
	// Timer and At are the timer's name and the instant it was set for, for
	// WakeTimer: the instant it was due, not the instant it ran.
	Timer string
	At    time.Time
}

// ArrivedMessage is the message a satisfied wait's continuation carries.
type ArrivedMessage struct {
	ID        int64 // docket's id
	Producer  string
	MessageID string // the producer's id
	Keys      []Key
	ArrivedAt time.Time
	Payload   json.RawMessage
}

// WakeOf returns why j, a continuation a wait or timer enqueued, runs (a
// timer of no case has CaseID 0). It refuses, with [db.ErrInvalidArgument], a job that is not one.
func WakeOf(j jobs.Job) (Wake, error) {
	var p struct {
		WaitID   int64      `json:"wait_id"`
		Wait     string     `json:"wait"`
		Outcome  WakeReason `json:"outcome"`
		Deadline time.Time  `json:"deadline"`
		Message  *struct {
			ID        int64           `json:"id"`
			Producer  string          `json:"producer"`
			MessageID string          `json:"message_id"`
			Keys      []string        `json:"keys"`
			ArrivedAt time.Time       `json:"arrived_at"`
			Payload   json.RawMessage `json:"payload"`
		} `json:"message"`
		Timer  string    `json:"timer"`
		WakeAt time.Time `json:"wake_at"`
	}
	refuse := func(why string) (Wake, error) {
		return Wake{}, db.Refuse(db.ErrInvalidArgument, "case.wake_of", fmt.Sprintf("job %d is not a continuation: %s", j.ID, why), "job", j.ID)
	}
	if len(j.Params) == 0 {
		return refuse("it has no params or no case")
	}
	if err := json.Unmarshal(j.Params, &p); err != nil {
		return refuse(err.Error())
	}
	// A timer needs no case ([Client.SetTimer]); a wait's continuation has one.
	if j.CaseID == 0 && (p.Timer == "" || p.WakeAt.IsZero()) {
		return refuse("it has no params or no case")
	}
	w := Wake{CaseID: j.CaseID}
	switch {
	case p.Timer != "" && !p.WakeAt.IsZero():
		w.Reason, w.Timer, w.At = WakeTimer, p.Timer, p.WakeAt.UTC()
	case p.WaitID != 0 && p.Outcome == WakeMessage && p.Message != nil:
		m := p.Message
		w.Reason, w.WaitID, w.Wait = WakeMessage, p.WaitID, p.Wait
		w.Message = &ArrivedMessage{
			ID: m.ID, Producer: m.Producer, MessageID: m.MessageID, Keys: parseKeys(m.Keys),
			ArrivedAt: m.ArrivedAt.UTC(), Payload: m.Payload,
		}
	case p.WaitID != 0 && p.Outcome == WakeExpired:
		w.Reason, w.WaitID, w.Wait, w.Deadline = WakeExpired, p.WaitID, p.Wait, p.Deadline.UTC()
	default:
		return refuse("its params name no wait or timer")
	}
	return w, nil
}
