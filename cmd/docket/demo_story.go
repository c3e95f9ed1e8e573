package main

// The demo's story after the invoices: an order fulfilled by a plan whose
// failure is compensated, a supplier switch whose cases wait for an
// acknowledgement due in business days, a human approval decided by a
// second principal, and a schedule's next runs across the change to winter
// time. It all runs on the demo's own clock, which the demo moves on instead
// of waiting for a deadline.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	_ "time/tzdata" // the story's zone, Europe/Berlin, on machines without a tz database

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/cases/calendar"
	"github.com/docket-dev/docket/db"
	"github.com/docket-dev/docket/jobs"
	"github.com/docket-dev/docket/plans"
	"github.com/docket-dev/docket/schedules"
	"github.com/docket-dev/docket/tasks"
	"github.com/docket-dev/docket/worker"
)

// The story's cast, besides the order service (demoService), which is also
// the principal the demo's worker runs as.
const (
	demoSwitch access.Actor = "svc:switch" // the supplier switch service: opens cases, waits, opens tasks
	demoInbox  access.Actor = "svc:inbox"  // the inbound gateway: delivers what suppliers send
	demoPat    access.Actor = "user:pat"   // asks for the switches, so may not approve them
	demoRita   access.Actor = "user:rita"  // approves switches
)

// The story's terms.
const (
	demoZone       = "Europe/Berlin"
	demoAckSpec    = "2 working days" // the supplier's acknowledgement is due in
	demoTaskSpec   = "1 working day"  // an approval is due in
	demoConfirm    = "5 working days" // the switch's confirmation is due in
	demoSupplier   = "supplier:stadtwerke-nord"
	demoCron       = "0 * * * *" // hourly: interval-like, so it runs at both 02:00s
	demoFixedCron  = "30 2 * * *"
	demoHorizon    = 72 * time.Hour // how long a message no wait claims is held before it is dead-lettered
	demoPreview    = 6
	demoSweepEvery = 24 * time.Hour // the story's sweeps run when the demo says, never on their own timer
	// demoSettleTimeout bounds waiting for the worker to finish the jobs
	// one step of the story enqueued.
	demoSettleTimeout = 20 * time.Second
)

// demoAt is an instant of the story's week, in Berlin: the week of 2026
// whose Sunday, 25 October, the clocks go back from 03:00 CEST to 02:00 CET.
func demoAt(loc *time.Location, day, hour, minute int) time.Time {
	return time.Date(2026, time.October, day, hour, minute, 0, 0, loc)
}

// demoClock is the demo's clock: the wall clock shifted. It runs at the wall
// clock's pace, so the worker's leases, heartbeats and retries behave as in
// a service, and the demo moves it on to the next moment of its story,
// between steps when the worker holds no job, instead of waiting days.
type demoClock struct{ offset atomic.Int64 }

var _ db.Clock = (*demoClock)(nil)

func newDemoClock(start time.Time) *demoClock {
	c := &demoClock{}
	c.offset.Store(int64(time.Until(start)))
	return c
}

func (c *demoClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load())).UTC().Truncate(time.Microsecond)
}

// moveTo moves the clock on to t; a t already passed leaves it where it is.
func (c *demoClock) moveTo(t time.Time) {
	if d := t.Sub(c.Now()); d > 0 {
		c.offset.Add(int64(d))
	}
}

// switchArgs is the payload of the supplier switch's jobs.
type switchArgs struct {
	Document string `json:"document"`
	Meter    string `json:"meter"`
}

// planArgs is the payload of a plan step's job: its assembled arguments.
type planArgs map[string]json.RawMessage

// The story's job kinds.
var (
	kindAcknowledged = jobs.MustKind[switchArgs]("switch.acknowledged", 1) // the acknowledgement's wait was satisfied
	kindApproved     = jobs.MustKind[switchArgs]("switch.approved", 1)     // the approval task was decided
	kindConfirmed    = jobs.MustKind[switchArgs]("switch.confirmed", 1)    // the switch was confirmed
	kindChase        = jobs.MustKind[switchArgs]("switch.chase", 1)        // a wait's deadline came first
	kindEscalate     = jobs.MustKind[switchArgs]("switch.escalate", 1)     // an obligation was breached
	kindReserve      = jobs.MustKind[planArgs]("stock.reserve", 1)
	kindRelease      = jobs.MustKind[planArgs]("stock.release", 1)
	kindCharge       = jobs.MustKind[planArgs]("billing.charge", 1)
	kindShip         = jobs.MustKind[planArgs]("shipping.book", 1)
	kindRefund       = jobs.MustKind[planArgs]("billing.refund", 1)
)

// storyGrants are what the story's cast may do in the demo's project; the
// demo's actor reads all of it.
func storyGrants(project string, reader access.Actor) []access.Grant {
	var gs []access.Grant
	add := func(p access.Actor, caps ...access.Capability) {
		for _, c := range caps {
			gs = append(gs, access.Grant{Principal: p, Project: project, Capability: c})
		}
	}
	add(demoService, access.PlanRun, access.CaseSweep)
	add(demoSwitch, access.CaseAdmit, access.JobCreate, access.ScheduleManage)
	add(demoInbox, access.MessageDeliver, access.JobCreate)
	add(demoPat, access.TaskReview)
	add(demoRita, access.TaskReview)
	add(reader, access.JobReconcile, access.CaseView, access.ScheduleView)
	return gs
}

// switchCase is one meter's switch, as the story follows it.
type switchCase struct {
	args       switchArgs
	caseID     int64
	obligation cases.Obligation
	wait       cases.Wait
	ack        cases.Delivered // the acknowledgement; zero for the meter that gets none
	ackJob     int64           // the acknowledgement's continuation
	task       tasks.Task      // the approval
	approveJob int64           // the approval's continuation
	confirm    cases.Wait      // the wait for the switch's confirmation
}

// story runs the demo's story on a project, as its cast.
type story struct {
	c       *cli
	pool    *pgxpool.Pool
	project string
	clock   *demoClock
	loc     *time.Location
	cal     *calendar.BusinessDays
	w       *worker.Client
	nudge   chan struct{} // the worker did something: look again

	switching *cases.Client // svc:switch
	inbox     *cases.Client // svc:inbox
	opener    *tasks.Client // svc:switch
	pat, rita *tasks.Client
	plans     *plans.Client     // svc:orders
	sched     *schedules.Client // svc:switch

	// What the story did, for its closing screen.
	run        plans.Run
	steps      []plans.RunStep
	refund     plans.Run // the run that waited for an approval
	refundTask int64
	switches   []*switchCase
	stray      cases.Delivered // a message under a key no case holds
	schedule   schedules.Schedule
}

func newStory(c *cli, pool *pgxpool.Pool, project string, clock *demoClock) (*story, error) {
	loc, err := time.LoadLocation(demoZone)
	if err != nil {
		return nil, err
	}
	cal, err := calendar.NewBusinessDays(calendar.BusinessDaysConfig{Zone: demoZone, Cutoff: "17:00"})
	if err != nil {
		return nil, err
	}
	s := &story{c: c, pool: pool, project: project, clock: clock, loc: loc, cal: cal, nudge: make(chan struct{}, 1),
		switches: []*switchCase{
			{args: switchArgs{Document: "DOC-4711", Meter: "51238696781"}},
			{args: switchArgs{Document: "DOC-4712", Meter: "51238696782"}},
		}}
	// NewClient refuses only a malformed actor or a nil pool: errors of
	// the demo's own making, reported together.
	var errs [7]error
	s.switching, errs[0] = cases.NewClient(pool, cases.Config{Actor: demoSwitch, Clock: clock})
	s.inbox, errs[1] = cases.NewClient(pool, cases.Config{Actor: demoInbox, Clock: clock})
	s.opener, errs[2] = tasks.NewClient(pool, tasks.Config{Actor: demoSwitch, Clock: clock})
	s.pat, errs[3] = tasks.NewClient(pool, tasks.Config{Actor: demoPat, Clock: clock})
	s.rita, errs[4] = tasks.NewClient(pool, tasks.Config{Actor: demoRita, Clock: clock})
	s.plans, errs[5] = plans.NewClient(pool, plans.Config{Actor: demoService, Clock: clock})
	s.sched, errs[6] = schedules.NewClient(pool, schedules.Config{Actor: demoSwitch, Clock: clock})
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return s, nil
}

// sweeps are the deadline sweeps the story runs itself, when its clock has
// passed a deadline.
func (s *story) sweeps() []worker.Sweep {
	return []worker.Sweep{cases.WaitExpirySweep(demoSweepEvery), cases.BreachSweep(demoSweepEvery), cases.TimerSweep(demoSweepEvery),
		cases.DeadLetterSweep(demoSweepEvery, demoHorizon)}
}

// onEvent tells the story the worker did something.
func (s *story) onEvent(worker.Event) {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// register adds the story's handlers to reg.
func (s *story) register(reg *worker.Registry) error {
	ok := func(v any) (worker.Result, error) {
		b, err := json.Marshal(v)
		return worker.Result{Value: b}, err
	}
	for _, err := range []error{
		worker.HandleResult(reg, kindAcknowledged, s.acknowledged),
		worker.HandleResult(reg, kindApproved, s.approved),
		worker.HandleResult(reg, kindConfirmed, func(_ context.Context, j *jobs.Typed[switchArgs]) (worker.Result, error) {
			return ok(map[string]string{"confirmed": j.Args.Meter})
		}),
		worker.HandleResult(reg, kindChase, func(_ context.Context, j *jobs.Typed[switchArgs]) (worker.Result, error) {
			return ok(map[string]string{"reminded": demoSupplier, "document": j.Args.Document})
		}),
		worker.HandleResult(reg, kindEscalate, func(_ context.Context, j *jobs.Typed[switchArgs]) (worker.Result, error) {
			return ok(map[string]string{"alerted": "the switch desk", "document": j.Args.Document})
		}),
		worker.HandleResult(reg, kindReserve, func(_ context.Context, j *jobs.Typed[planArgs]) (worker.Result, error) {
			var order string
			_ = json.Unmarshal(j.Args["order"], &order)
			return ok(map[string]any{"reservation": "R-" + order, "items": j.Args["items"]})
		}),
		worker.HandleResult(reg, kindCharge, func(context.Context, *jobs.Typed[planArgs]) (worker.Result, error) {
			return worker.Result{}, worker.Fail(jobs.ClassPermanent, errors.New("card declined by the issuer"))
		}),
		worker.HandleResult(reg, kindRelease, func(_ context.Context, j *jobs.Typed[planArgs]) (worker.Result, error) {
			// A compensation gets {"args", "result", "step", "outcome"}.
			var res struct {
				Reservation string `json:"reservation"`
			}
			_ = json.Unmarshal(j.Args["result"], &res)
			return ok(map[string]string{"released": res.Reservation})
		}),
		worker.HandleResult(reg, kindShip, func(context.Context, *jobs.Typed[planArgs]) (worker.Result, error) {
			return ok(map[string]string{"booked": "parcel"})
		}),
		worker.HandleResult(reg, kindRefund, func(_ context.Context, j *jobs.Typed[planArgs]) (worker.Result, error) {
			return ok(map[string]any{"refunded": j.Args["order"], "decision": j.Args["decision"]})
		}),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// acknowledged runs when a supplier's acknowledgement satisfied a case's
// wait: in the transaction that records its success, it meets the case's
// obligation, writes the case's state and opens the approval task, due a
// working day after the acknowledgement arrived.
func (s *story) acknowledged(_ context.Context, j *jobs.Typed[switchArgs]) (worker.Result, error) {
	wake, err := cases.WakeOf(j.Job)
	if err == nil && wake.Reason != cases.WakeMessage {
		err = fmt.Errorf("job %d woke for %s, not for a message", j.ID, wake.Reason)
	}
	if err != nil {
		return worker.Result{}, worker.Fail(jobs.ClassPermanent, err)
	}
	// From the recorded arrival, never the clock: a retry opens the same task.
	due, err := s.cal.Resolve(wake.Message.ArrivedAt, demoTaskSpec)
	if err != nil {
		return worker.Result{}, worker.Fail(jobs.ClassPermanent, err)
	}
	payload, _ := json.Marshal(j.Args)
	return worker.Result{WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
		if err := s.meet(ctx, tx, wake.CaseID, "acknowledge"); err != nil {
			return err
		}
		if err := s.putState(ctx, tx, wake.CaseID, map[string]string{"step": "acknowledged", "by": wake.Message.MessageID}); err != nil {
			return err
		}
		_, err := s.opener.OpenTx(ctx, tx, wake.CaseID, tasks.Spec{
			Key:   "approve-switch",
			Title: "Approve the switch of meter " + j.Args.Meter + " to Stadtwerke Nord",
			Summary: fmt.Sprintf("%s asked for it; the supplier acknowledged %s with %s.",
				demoPat, j.Args.Document, wake.Message.MessageID),
			Proposal:             payload,
			Evidence:             wake.Message.Payload,
			Decisions:            []string{"approve", "reject"},
			AudienceCapabilities: []access.Capability{access.TaskReview},
			Proposer:             demoPat,
			Deadline:             due,
			Expiry:               tasks.Escalate([]access.Actor{"user:lead"}, nil, 24*time.Hour),
			Continuation:         cases.Continuation{Kind: kindApproved.Name(), Payload: payload},
		})
		return err
	}}, nil
}

// approved runs when the approval task was decided: approved, the case
// waits for the new supplier's confirmation, due five working days after
// the decision.
func (s *story) approved(_ context.Context, j *jobs.Typed[switchArgs]) (worker.Result, error) {
	d, err := tasks.DecisionOf(j.Job)
	if err != nil {
		return worker.Result{}, worker.Fail(jobs.ClassPermanent, err)
	}
	due, err := s.cal.Resolve(d.At, demoConfirm)
	if err != nil {
		return worker.Result{}, worker.Fail(jobs.ClassPermanent, err)
	}
	payload, _ := json.Marshal(j.Args)
	return worker.Result{WritesFunc: func(ctx context.Context, tx pgx.Tx) error {
		caseID := j.CaseID
		step := map[string]string{"approve": "approved", "reject": "rejected"}[d.Decision]
		if err := s.putState(ctx, tx, caseID, map[string]string{"step": step, "by": string(d.DecidedBy)}); err != nil {
			return err
		}
		if d.Decision != "approve" {
			return nil
		}
		_, err := s.switching.AwaitTx(ctx, tx, caseID, cases.WaitSpec{
			Name:      "confirmation",
			Keys:      []cases.Key{{Namespace: "meter", Value: j.Args.Meter}},
			Deadline:  due,
			OnArrival: cases.Continuation{Kind: kindConfirmed.Name(), Payload: payload},
			OnTimeout: &cases.Continuation{Kind: kindChase.Name(), Payload: payload},
		})
		return err
	}}, nil
}

// meet meets case caseID's pending obligation name in tx.
func (s *story) meet(ctx context.Context, tx pgx.Tx, caseID int64, name string) error {
	obs, err := s.switching.ObligationsTx(ctx, tx, caseID)
	if err != nil {
		return err
	}
	for _, o := range obs {
		if o.Name == name && o.State == cases.Pending {
			_, err := s.switching.MeetTx(ctx, tx, o.ID)
			return err
		}
	}
	return nil
}

// putState writes v as case caseID's state in tx, over the version it reads.
func (s *story) putState(ctx context.Context, tx pgx.Tx, caseID int64, v any) error {
	snap, err := s.switching.StateTx(ctx, tx, caseID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.switching.PutStateTx(ctx, tx, caseID, snap.Version, b)
	return err
}

// settle waits until the worker has finished every job of the project: what
// the last step of the story enqueued, what those enqueued, and their
// retries. The story enqueues no job due later.
func (s *story) settle(ctx context.Context) error {
	timeout := time.NewTimer(demoSettleTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(demoPoll)
	defer tick.Stop()
	for {
		var busy int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM docket.jobs WHERE project = $1 AND state IN ('queued', 'claimed')`,
			s.project).Scan(&busy)
		if err != nil || busy == 0 {
			return err
		}
		select {
		case <-s.nudge:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case <-timeout.C:
			return fmt.Errorf("the worker did not finish the story's %d jobs within %v", busy, demoSettleTimeout)
		}
	}
}

// jobState reads job id's kind and state.
func (s *story) jobState(ctx context.Context, id int64) (kind string, state jobs.State, err error) {
	err = s.pool.QueryRow(ctx, `SELECT kind, state FROM docket.jobs WHERE id = $1`, id).Scan(&kind, &state)
	return kind, state, err
}

// requireJob fails unless job id ended in want.
func (s *story) requireJob(ctx context.Context, id int64, want jobs.State) error {
	kind, state, err := s.jobState(ctx, id)
	if err != nil {
		return err
	}
	if state != want {
		return fmt.Errorf("job %d (%s) is %s, not %s", id, kind, state, want)
	}
	return nil
}

// at prints the clock's instant as the story's timeline does.
func (s *story) at() string { return s.when(s.clock.Now()) }

// when prints t in the story's zone: "Fri 23 Oct 10:15 CEST".
func (s *story) when(t time.Time) string { return t.In(s.loc).Format("Mon 02 Jan 15:04 MST") }

// line prints one moment of the story: when, then what, wrapped, the lines
// after the first indented under it.
func (s *story) line(when, format string, args ...any) {
	lines := wrap(fmt.Sprintf(format, args...), demoWidth-demoIndent)
	fmt.Fprintf(s.c.stdout, "  %-21s  %s\n", when, strings.Join(lines, "\n"+strings.Repeat(" ", demoIndent)))
}

// The story's lines are wrapped at demoWidth characters, after the
// demoIndent of its timeline.
const demoWidth, demoIndent = 100, 25

// para prints a paragraph after a blank line, wrapped and indented.
func (s *story) para(format string, args ...any) {
	fmt.Fprintf(s.c.stdout, "\n  %s\n", strings.Join(wrap(fmt.Sprintf(format, args...), demoWidth-2), "\n  "))
}

// section prints a section's title.
func (s *story) section(format string, args ...any) {
	fmt.Fprintf(s.c.stdout, "\n%s\n\n", fmt.Sprintf(format, args...))
}

// tell runs the story, after the invoices, and prints it.
func (s *story) tell(ctx context.Context) error {
	for _, part := range []func(context.Context) error{s.fulfil, s.request, s.acknowledge, s.approve, s.scheduleReadings, s.passDeadline} {
		if err := part(ctx); err != nil {
			return err
		}
	}
	return nil
}

// fulfil runs an order's fulfilment as a plan whose charge fails, so the
// stock it reserved is released.
func (s *story) fulfil(ctx context.Context) error {
	s.clock.moveTo(demoAt(s.loc, 22, 9, 30))
	s.section("2. A plan with a compensation: reserve, charge and ship order A-1041, whose card is declined")
	input := plans.Input
	p := plans.Plan{Steps: []plans.Step{
		{ID: "reserve", Kind: kindReserve.Name(), Compensation: kindRelease.Name(), Args: []plans.Arg{
			{Name: "order", Source: input("order")}, {Name: "items", Source: input("items")}}},
		{ID: "charge", Kind: kindCharge.Name(), After: []string{"reserve"}, Args: []plans.Arg{
			{Name: "order", Source: input("order")}, {Name: "amount_minor", Source: input("amount_minor")}}},
		{ID: "ship", Kind: kindShip.Name(), After: []string{"charge"}, Terminal: true, Args: []plans.Arg{
			{Name: "reservation", Source: plans.StepPath("reserve", "reservation")}}},
	}}
	run, err := s.plans.Start(ctx, plans.Start{Project: s.project, Plan: p, InputTrusted: true,
		Input: json.RawMessage(`{"order": "A-1041", "items": 2, "amount_minor": 4990}`)})
	if err != nil {
		return err
	}
	s.line(s.at(), "%s starts run %d of plan %s, reserve → charge → ship: each step a job the worker runs, admitted once the steps before it have succeeded.",
		demoService, run.ID, shortDigest(run.Digest))
	if err := s.settle(ctx); err != nil {
		return err
	}
	if s.run, err = s.plans.Get(ctx, run.ID); err != nil {
		return err
	}
	if s.steps, err = s.plans.Steps(ctx, run.ID); err != nil {
		return err
	}
	if s.run.Status != plans.Compensated {
		return fmt.Errorf("run %d is %s, not compensated: %s", run.ID, s.run.Status, s.run.Failure)
	}
	fmt.Fprintln(s.c.stdout)
	t := newTable(s.c.stdout, "    ", "step", "kind", "state", "job", "compensation")
	for _, st := range s.steps {
		comp := "-"
		if st.CompensationJobID != 0 {
			comp = fmt.Sprintf("%s, job %d", st.Compensation, st.CompensationJobID)
			if err := s.requireJob(ctx, st.CompensationJobID, jobs.Succeeded); err != nil {
				return err
			}
		}
		t.row(st.StepID, st.Kind, string(st.State), fmt.Sprint(st.JobID), comp)
	}
	t.flush()
	s.para("Run %d is %s. The charge failed for good (%s), so the run unwound: the compensations "+
		"of the steps that had succeeded ran, in reverse order, and released the stock. Ship was never admitted.",
		s.run.ID, s.run.Status, oneLine(s.run.Failure))
	return nil
}

// request opens a case for each meter to switch, registers the
// acknowledgement it is owed in business days, and waits for it.
func (s *story) request(ctx context.Context) error {
	s.clock.moveTo(demoAt(s.loc, 22, 10, 0))
	s.section("3. A supplier switch: each case waits for the supplier's acknowledgement, due in %s", demoAckSpec)
	s.line(s.at(), "%s asks to switch two meters to Stadtwerke Nord. For each, %s opens a case "+
		"that owes an acknowledgement in %s (%s calendar, cut-off 17:00), and waits for it on the document number:",
		demoPat, demoSwitch, demoAckSpec, demoZone)
	for _, sw := range s.switches {
		keys := []cases.Key{{Namespace: "document", Value: sw.args.Document}, {Namespace: "meter", Value: sw.args.Meter}}
		adm, err := s.switching.Admit(ctx, cases.Admission{Project: s.project, Kind: "supplier.switch", Keys: keys})
		if err != nil {
			return err
		}
		sw.caseID = adm.ID
		payload, _ := json.Marshal(sw.args)
		sw.obligation, err = s.switching.RegisterFromSpec(ctx, adm.ID, "acknowledge",
			cases.Deadline{Calendar: s.cal, From: s.clock.Now(), Spec: demoAckSpec},
			&cases.Escalation{Kind: kindEscalate.Name(), Payload: payload})
		if err != nil {
			return err
		}
		w, err := s.switching.Await(ctx, adm.ID, cases.WaitSpec{
			Name:      "acknowledgement",
			Keys:      keys[:1],
			Deadline:  sw.obligation.Due,
			OnArrival: cases.Continuation{Kind: kindAcknowledged.Name(), Payload: payload},
			OnTimeout: &cases.Continuation{Kind: kindChase.Name(), Payload: payload},
		})
		if err != nil {
			return err
		}
		sw.wait = w.Wait
	}
	fmt.Fprintln(s.c.stdout)
	t := newTable(s.c.stdout, "    ", "case", "keys", "wait", "on", "due")
	for _, sw := range s.switches {
		t.row(fmt.Sprint(sw.caseID), "document "+sw.args.Document+", meter "+sw.args.Meter, fmt.Sprint(sw.wait.ID),
			"document "+sw.args.Document, s.when(sw.obligation.Due))
	}
	t.flush()
	s.para("Asked on Thursday before the cut-off: Friday is the first working day, Saturday and Sunday " +
		"do not count, so the second is Monday, at 17:00. In winter time: the clocks go back on Sunday.")
	fmt.Fprintln(s.c.stdout)
	return nil
}

// acknowledge delivers the supplier's acknowledgement of the first switch,
// by its document number: it satisfies that case's wait.
func (s *story) acknowledge(ctx context.Context) error {
	s.clock.moveTo(demoAt(s.loc, 23, 10, 15))
	sw := s.switches[0]
	d, err := s.inbox.Deliver(ctx, cases.Delivery{
		Project: s.project, Producer: demoSupplier, MessageID: "ACK-4711",
		Keys:    []cases.Key{{Namespace: "document", Value: sw.args.Document}},
		Payload: json.RawMessage(`{"accepted": true, "switch_date": "2026-11-01"}`),
	})
	if err != nil {
		return err
	}
	if d.Status != cases.Consumed || d.ContinuationJobID == 0 {
		return fmt.Errorf("the acknowledgement is %s: no wait took it", d.Status)
	}
	sw.ack, sw.ackJob = d, d.ContinuationJobID
	if err := s.settle(ctx); err != nil {
		return err
	}
	if err := s.requireJob(ctx, sw.ackJob, jobs.Succeeded); err != nil {
		return err
	}
	if sw.wait, err = s.switching.Wait(ctx, sw.wait.ID); err != nil {
		return err
	}
	if sw.obligation, err = s.switching.Obligation(ctx, sw.obligation.ID); err != nil {
		return err
	}
	list, err := s.rita.Worklist(ctx, s.project, false, tasks.Page{})
	if err != nil {
		return err
	}
	for _, t := range list {
		if t.CaseID == sw.caseID {
			sw.task = t
		}
	}
	if sw.task.ID == 0 {
		return fmt.Errorf("case %d has no approval task", sw.caseID)
	}
	s.line(s.at(), "%s delivers %s from %s, filed under document %s only. "+
		"Correlated by that key, it satisfies case %d's wait %d (now %s), and in that transaction "+
		"the wait's continuation, job %d %s, is enqueued. The worker ran it: "+
		"it met obligation %d (now %s) and opened approval task %d, due %s.",
		demoInbox, d.MessageID, demoSupplier, sw.args.Document, sw.caseID, sw.wait.ID, sw.wait.Status,
		sw.ackJob, kindAcknowledged.Name(), sw.obligation.ID, sw.obligation.State, sw.task.ID, s.when(sw.task.Deadline))

	// The other acknowledgement, under a mistyped document number.
	s.clock.moveTo(demoAt(s.loc, 23, 10, 20))
	if s.stray, err = s.inbox.Deliver(ctx, cases.Delivery{
		Project: s.project, Producer: demoSupplier, MessageID: "ACK-4721",
		Keys:    []cases.Key{{Namespace: "document", Value: "DOC-4721"}},
		Payload: json.RawMessage(`{"accepted": true}`),
	}); err != nil {
		return err
	}
	if s.stray.Status != cases.Buffered {
		return fmt.Errorf("message %s is %s, not buffered", s.stray.MessageID, s.stray.Status)
	}
	s.line(s.at(), "%s delivers %s, filed under document DOC-4721: a typo for DOC-4712. No case holds "+
		"that key, so it is buffered (message %d), held for a wait that may yet come, not dropped.",
		demoInbox, s.stray.MessageID, s.stray.ID)
	return nil
}

// approve has the approval task refused to the one who asked for the
// switch, and decided by a second person.
func (s *story) approve(ctx context.Context) error {
	s.clock.moveTo(demoAt(s.loc, 23, 11, 0))
	sw := s.switches[0]
	s.section("4. A human approval, four eyes: the switch is approved by a person, and not the one who asked")
	_, err := s.pat.Claim(ctx, sw.task.ID, 0)
	if !errors.Is(err, db.ErrExcludedActor) {
		return fmt.Errorf("%s claimed the task %s proposed: %v", demoPat, demoPat, err)
	}
	s.line(s.at(), "%s, who holds task.review but asked for the switch, claims task %d: refused.\n%s",
		demoPat, sw.task.ID, oneLine(err.Error()))
	s.clock.moveTo(demoAt(s.loc, 23, 11, 5))
	if _, err := s.rita.Claim(ctx, sw.task.ID, 30*time.Minute); err != nil {
		return err
	}
	s.line(s.at(), "%s claims task %d for 30 minutes", demoRita, sw.task.ID)
	s.clock.moveTo(demoAt(s.loc, 23, 11, 12))
	note := "Stadtwerke Nord confirmed the switch date, 1 November"
	t, err := s.rita.Decide(ctx, sw.task.ID, "approve", note)
	if err != nil {
		return err
	}
	sw.task = t
	w, err := s.switching.Wait(ctx, t.WaitID)
	if err != nil {
		return err
	}
	sw.approveJob = w.ContinuationJobID
	if err := s.settle(ctx); err != nil {
		return err
	}
	if err := s.requireJob(ctx, sw.approveJob, jobs.Succeeded); err != nil {
		return err
	}
	waits, err := s.switching.Waits(ctx, sw.caseID)
	if err != nil {
		return err
	}
	for _, w := range waits {
		if w.Name == "confirmation" {
			sw.confirm = w
		}
	}
	if sw.confirm.ID == 0 {
		return fmt.Errorf("case %d does not wait for its confirmation", sw.caseID)
	}
	s.line(s.at(), "%s decides %s: %q. "+
		"The decision is delivered to the task's wait, whose continuation, job %d %s, ran: "+
		"case %d now waits for the switch's confirmation (wait %d), due %s (%s).",
		t.DecidedBy, t.Decision, t.Note, sw.approveJob, kindApproved.Name(), sw.caseID, sw.confirm.ID, s.when(sw.confirm.Deadline), demoConfirm)
	return s.waitingRun(ctx)
}

// waitingRun runs a refund as a plan whose first step opens an approval
// task and waits: the run is suspended, holding no job, until a second
// person decides; then the refund runs with the decision.
func (s *story) waitingRun(ctx context.Context) error {
	s.clock.moveTo(demoAt(s.loc, 23, 11, 30))
	input := plans.Input
	p := plans.Plan{Steps: []plans.Step{
		{ID: "approve", Args: []plans.Arg{{Name: "order", Source: input("order")}, {Name: "amount_minor", Source: input("amount_minor")}},
			Wait: plans.Approval(plans.TaskSpec{Title: "Refund order A-1041", Decisions: []string{"approve", "reject"},
				Audience: []access.Actor{demoService, demoRita}, Within: 24 * time.Hour, AutoDecision: "reject"})},
		{ID: "refund", Kind: kindRefund.Name(), After: []string{"approve"}, Terminal: true, Args: []plans.Arg{
			{Name: "order", Source: input("order")}, {Name: "decision", Source: plans.StepPath("approve", "decision")}}},
	}}
	run, err := s.plans.Start(ctx, plans.Start{Project: s.project, Plan: p, InputTrusted: true,
		Input: json.RawMessage(`{"order": "A-1041", "amount_minor": 4990}`)})
	if err != nil {
		return err
	}
	waits, err := s.plans.Waits(ctx, run.ID)
	if err != nil {
		return err
	}
	if !run.Suspended || len(waits) != 1 || waits[0].TaskID == 0 {
		return fmt.Errorf("run %d is not suspended on an approval task: %+v", run.ID, waits)
	}
	s.refundTask = waits[0].TaskID
	s.line(s.at(), "%s starts run %d, approve → refund: the approve step is no job but task %d, due %s. "+
		"The run is suspended: no job, no worker, no lease holds it.", demoService, run.ID, s.refundTask, s.when(waits[0].Deadline))
	starter, err := tasks.NewClient(s.pool, tasks.Config{Actor: demoService, Clock: s.clock})
	if err != nil {
		return err
	}
	_, err = starter.Decide(ctx, s.refundTask, "approve", "")
	if !errors.Is(err, db.ErrExcludedActor) {
		return fmt.Errorf("%s answered the task of the run it started: %v", demoService, err)
	}
	s.line(s.at(), "%s, which started the run, approves its own refund: refused (four eyes) [DK008].", demoService)
	s.clock.moveTo(demoAt(s.loc, 23, 11, 40))
	if _, err := s.rita.Decide(ctx, s.refundTask, "approve", "goodwill"); err != nil {
		return err
	}
	if err := s.settle(ctx); err != nil {
		return err
	}
	if s.refund, err = s.plans.Get(ctx, run.ID); err != nil {
		return err
	}
	if s.refund.Status != plans.Succeeded {
		return fmt.Errorf("run %d is %s, not succeeded: %s", run.ID, s.refund.Status, s.refund.Failure)
	}
	s.line(s.at(), "%s approves: the decision is the approve step's result, the run resumes, and the refund job runs "+
		"with it. Run %d is %s: %s.", demoRita, run.ID, s.refund.Status, oneLine(string(s.refund.Output)))
	return nil
}

// scheduleReadings creates an hourly schedule on the eve of the change to
// winter time and shows its next runs: 02:00 comes twice.
func (s *story) scheduleReadings(ctx context.Context) error {
	s.clock.moveTo(demoAt(s.loc, 24, 23, 30))
	s.section("5. A schedule across the change to winter time: Sunday 25 October, 03:00 CEST becomes 02:00 CET")
	sc, err := s.sched.Create(ctx, schedules.Spec{
		Project: s.project, Name: "meter-readings", Cron: demoCron, Zone: demoZone,
		Job:       schedules.Job{Kind: "meter.import", Payload: json.RawMessage(`{"supplier": "stadtwerke-nord"}`)},
		Unbounded: true, UnboundedReason: "meter readings are imported for as long as the supply contract runs",
	})
	if err != nil {
		return err
	}
	s.schedule = sc
	occ, err := s.sched.Preview(ctx, sc.ID, demoPreview)
	if err != nil {
		return err
	}
	s.line(s.at(), "%s creates schedule %d, %s, %q in %s, to import meter readings every hour. Its next runs:",
		demoSwitch, sc.ID, sc.Name, sc.Cron, sc.Zone)
	fmt.Fprintln(s.c.stdout)
	t := newTable(s.c.stdout, "    ", "local ("+demoZone+")", "fold", "UTC instant", "")
	folded := false
	for _, o := range occ {
		note := o.At.In(s.loc).Format("MST")
		if o.Fold == 1 {
			note += ": 02:00 again, an hour later"
			folded = true
		}
		t.row(o.Local.Format("Mon 02 Jan 15:04"), fmt.Sprint(o.Fold), o.At.Format(time.RFC3339), note)
	}
	t.flush()
	if !folded {
		return errors.New("the schedule's preview does not cross the change to winter time")
	}
	fixed, err := schedules.Preview(demoFixedCron, demoZone, s.clock.Now(), 2)
	if err != nil {
		return err
	}
	s.para("An occurrence is its local time and fold. Hourly means every 60 real minutes, so it runs at "+
		"both 02:00s. A fixed time runs once: %q at %s (fold %d), then %s.",
		demoFixedCron, fixed[0].At.Format(time.RFC3339), fixed[0].Fold, fixed[1].At.Format(time.RFC3339))
	return nil
}

// passDeadline moves the clock past the acknowledgement's deadline and runs
// the deadline sweeps: the switch that was never acknowledged expires and is
// breached, and its timeout and escalation jobs run.
func (s *story) passDeadline(ctx context.Context) error {
	due := s.switches[1].obligation.Due
	s.section("6. The deadline passes on the demo's clock: case %d was never acknowledged", s.switches[1].caseID)
	s.clock.moveTo(due.Add(-time.Minute))
	expired, breached, err := s.sweep(ctx)
	if err != nil {
		return err
	}
	if expired+breached != 0 {
		return fmt.Errorf("a minute before the deadline the sweeps moved %d waits and %d obligations", expired, breached)
	}
	s.line(s.at(), "the wait expiry and breach sweeps, run now: nothing is due yet")
	s.clock.moveTo(due)
	if expired, breached, err = s.sweep(ctx); err != nil {
		return err
	}
	dead, err := s.w.Sweep(ctx, cases.SweepDeadLetters)
	if err != nil {
		return err
	}
	if dead != 1 {
		return fmt.Errorf("the dead-letter sweep moved %d messages, not %s", dead, s.stray.MessageID)
	}
	if err := s.settle(ctx); err != nil {
		return err
	}
	sw := s.switches[1]
	if sw.wait, err = s.switching.Wait(ctx, sw.wait.ID); err != nil {
		return err
	}
	if sw.obligation, err = s.switching.Obligation(ctx, sw.obligation.ID); err != nil {
		return err
	}
	if sw.wait.Status != cases.Expired || sw.obligation.State != cases.Breached {
		return fmt.Errorf("case %d's wait is %s and its obligation %s", sw.caseID, sw.wait.Status, sw.obligation.State)
	}
	for _, id := range []int64{sw.wait.ContinuationJobID, sw.obligation.EscalationJobID} {
		if err := s.requireJob(ctx, id, jobs.Succeeded); err != nil {
			return err
		}
	}
	s.line(s.at(), "run again: they expire %d wait and breach %d obligation, of case %d. The worker ran "+
		"job %d %s, the wait's timeout, which reminded the supplier, and "+
		"job %d %s, the obligation's escalation, which alerted the switch desk. "+
		"The dead-letter sweep gives up on %s, which no wait claimed within %d days: a dead letter "+
		"says a correlation key is wrong somewhere.",
		expired, breached, sw.caseID, sw.wait.ContinuationJobID, kindChase.Name(), sw.obligation.EscalationJobID, kindEscalate.Name(),
		s.stray.MessageID, demoHorizon/(24*time.Hour))
	fmt.Fprintln(s.c.stdout)
	t := newTable(s.c.stdout, "    ", "case", "acknowledgement", "obligation", "then")
	for _, sw := range s.switches {
		ack, then := "none", fmt.Sprintf("chased (job %d), escalated (job %d)", sw.wait.ContinuationJobID, sw.obligation.EscalationJobID)
		if sw.ack.ID != 0 {
			ack = sw.ack.MessageID + ", " + s.when(sw.ack.ArrivedAt)
			then = "approved by " + string(sw.task.DecidedBy)
		}
		t.row(fmt.Sprint(sw.caseID), ack, string(sw.obligation.State), then)
	}
	t.flush()
	return nil
}

// sweep runs the wait expiry and obligation breach sweeps once each, at the
// clock's instant, and reports what they moved.
func (s *story) sweep(ctx context.Context) (expired, breached int, err error) {
	if expired, err = s.w.Sweep(ctx, cases.SweepWaitExpiry); err != nil {
		return 0, 0, err
	}
	breached, err = s.w.Sweep(ctx, cases.SweepBreaches)
	return expired, breached, err
}
