package cases_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/docket-dev/docket/access"
	"github.com/docket-dev/docket/cases"
	"github.com/docket-dev/docket/db"
)

// TestRefusals: malformed, oversized, out-of-range and unauthorised input is
// refused with its sentinel, and writes nothing.
func TestRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	o, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "ack", Due: t0.Add(time.Hour)})
	require.NoError(t, err)
	many := make([]cases.Key, cases.MaxKeys+1)
	for i := range many {
		many[i] = key("k", strings.Repeat("v", i+1))
	}
	admit := func(a cases.Admission) error { _, err := e.app.Admit(ctx, a); return err }
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"no keys", func() error { return admit(cases.Admission{Project: project, Kind: "k"}) }, db.ErrInvalidArgument},
		{"too many keys", func() error { return admit(cases.Admission{Project: project, Kind: "k", Keys: many}) }, db.ErrInvalidArgument},
		{"bad namespace", func() error {
			return admit(cases.Admission{Project: project, Kind: "k", Keys: []cases.Key{key("Doc", "1")}})
		}, db.ErrInvalidArgument},
		{"empty value", func() error {
			return admit(cases.Admission{Project: project, Kind: "k", Keys: []cases.Key{key("doc", "")}})
		}, db.ErrInvalidArgument},
		{"long value", func() error {
			return admit(cases.Admission{Project: project, Kind: "k", Keys: []cases.Key{key("doc", strings.Repeat("x", 256))}})
		}, db.ErrInvalidArgument},
		{"control character", func() error {
			return admit(cases.Admission{Project: project, Kind: "k", Keys: []cases.Key{key("doc", "a\nb")}})
		}, db.ErrInvalidArgument},
		{"key twice", func() error {
			return admit(cases.Admission{Project: project, Kind: "k", Keys: []cases.Key{key("doc", "1"), key("doc", "1")}})
		}, db.ErrInvalidArgument},
		{"bad kind", func() error {
			return admit(cases.Admission{Project: project, Kind: "Bad Kind", Keys: []cases.Key{key("doc", "9")}})
		}, db.ErrInvalidArgument},
		{"bad project", func() error {
			return admit(cases.Admission{Project: "ACME", Kind: "k", Keys: []cases.Key{key("doc", "9")}})
		}, db.ErrInvalidArgument},
		{"no grant", func() error {
			_, err := e.as(t, sam).Admit(ctx, cases.Admission{Project: project, Kind: "k", Keys: []cases.Key{key("doc", "9")}})
			return err
		}, db.ErrNotPermitted},
		{"view only", func() error {
			_, err := e.as(t, vic).Admit(ctx, cases.Admission{Project: project, Kind: "k", Keys: []cases.Key{key("doc", "9")}})
			return err
		}, db.ErrNotPermitted},
		{"unknown project", func() error {
			return admit(cases.Admission{Project: "nowhere", Kind: "k", Keys: []cases.Key{key("doc", "9")}})
		}, db.ErrNotPermitted},
		{"correlate without grant", func() error {
			_, err := e.as(t, rival).Correlate(ctx, project, key("document", "DOC-1"))
			return err
		}, db.ErrNotPermitted},
		{"state not JSON", func() error { _, err := e.app.PutState(ctx, c.ID, 1, json.RawMessage(`{`)); return err }, db.ErrInvalidArgument},
		{"state empty", func() error { _, err := e.app.PutState(ctx, c.ID, 1, nil); return err }, db.ErrInvalidArgument},
		{"state over 1 MiB", func() error {
			_, err := e.app.PutState(ctx, c.ID, 1, json.RawMessage(`"`+strings.Repeat("x", cases.MaxState)+`"`))
			return err
		}, db.ErrInvalidArgument},
		{"state over 1 MiB by SQL", func() error {
			_, err := e.Pool.Exec(ctx, `SELECT docket.case_put_state($1, 1, to_jsonb(repeat('x', 1048576)), 'svc:app', $2)`, c.ID, t0)
			return db.Translate(err, "raw")
		}, db.ErrInvalidArgument},
		{"negative version", func() error { _, err := e.app.PutState(ctx, c.ID, -1, json.RawMessage(`{}`)); return err }, db.ErrInvalidArgument},
		{"write by a viewer", func() error { _, err := e.as(t, vic).PutState(ctx, c.ID, 1, json.RawMessage(`{}`)); return err }, db.ErrNotFound},
		{"write by another project's actor", func() error { _, err := e.as(t, rival).Close(ctx, c.ID); return err }, db.ErrNotFound},
		{"reopen by a stranger", func() error { _, err := e.as(t, sam).Reopen(ctx, c.ID); return err }, db.ErrNotFound},
		{"unknown case", func() error { _, err := e.app.Close(ctx, 987654); return err }, db.ErrNotFound},
		{"obligation bad name", func() error {
			_, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "", Due: t0})
			return err
		}, db.ErrInvalidArgument},
		{"obligation zero due", func() error {
			_, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "x"})
			return err
		}, db.ErrInvalidArgument},
		{"obligation infinite due by SQL", func() error {
			_, err := e.Pool.Exec(ctx, `SELECT docket.obligation_register($1, 'x', 'infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'svc:app', $2)`, c.ID, t0)
			return db.Translate(err, "raw")
		}, db.ErrInvalidArgument},
		{"escalation bad kind", func() error {
			_, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "x", Due: t0, Escalation: &cases.Escalation{Kind: "Bad"}})
			return err
		}, db.ErrInvalidArgument},
		{"escalation attempts out of range", func() error {
			_, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "x", Due: t0, Escalation: &cases.Escalation{Kind: "a.b", MaxAttempts: 101}})
			return err
		}, db.ErrInvalidArgument},
		{"rule without digest by SQL", func() error {
			_, err := e.Pool.Exec(ctx, `SELECT docket.obligation_register($1, 'x', $2, '1h', NULL, NULL, NULL, NULL, NULL, NULL, 'svc:app', $2)`, c.ID, t0)
			return db.Translate(err, "raw")
		}, db.ErrInvalidArgument},
		{"bad digest by SQL", func() error {
			_, err := e.Pool.Exec(ctx, `SELECT docket.obligation_register($1, 'x', $2, '1h', 'md5:1', NULL, NULL, NULL, NULL, NULL, 'svc:app', $2)`, c.ID, t0)
			return db.Translate(err, "raw")
		}, db.ErrInvalidArgument},
		{"long spec", func() error {
			_, err := e.app.RegisterFromSpec(ctx, c.ID, "x", cases.Deadline{Calendar: fixedCalendar{}, From: t0, Spec: strings.Repeat("1", 501)}, nil)
			return err
		}, db.ErrInvalidArgument},
		{"settle to pending", func() error { _, err := e.app.Settle(ctx, o.ID, cases.Pending); return err }, db.ErrInvalidArgument},
		{"settle by a viewer", func() error { _, err := e.as(t, vic).Meet(ctx, o.ID); return err }, db.ErrNotFound},
		{"settle unknown", func() error { _, err := e.app.Meet(ctx, 987654); return err }, db.ErrNotFound},
		{"sweep batch out of range", func() error {
			_, err := e.Pool.Exec(ctx, `SELECT docket.obligation_breach_due(10001, 'svc:sweeper', $1)`, t0)
			return db.Translate(err, "raw")
		}, db.ErrInvalidArgument},
		{"no change context", func() error {
			_, err := e.Pool.Exec(ctx, `SELECT docket.case_close($1, NULL, $2)`, c.ID, t0)
			return db.Translate(err, "raw")
		}, db.ErrInvalidArgument},
		{"list bad limit", func() error {
			_, err := e.app.List(ctx, cases.Filter{Project: project, Limit: db.MaxPage + 1})
			return err
		}, db.ErrInvalidArgument},
		{"list bad status", func() error { _, err := e.app.List(ctx, cases.Filter{Project: project, Status: "gone"}); return err }, db.ErrInvalidArgument},
		{"list no project", func() error { _, err := e.app.List(ctx, cases.Filter{}); return err }, db.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, e.Pool)
			err := tc.do()
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, before, snapshot(t, e.Pool), "a refusal writes nothing")
		})
	}
}

// TestReadsAreFiltered: cases of a project the actor holds no case grant on
// are not there.
func TestReadsAreFiltered(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	for _, actor := range []access.Actor{sam, rival, sweeper} {
		r := e.as(t, actor)
		_, err := r.Get(ctx, c.ID)
		require.ErrorIs(t, err, db.ErrNotFound, string(actor))
		_, err = r.History(ctx, c.ID)
		require.ErrorIs(t, err, db.ErrNotFound, string(actor))
		_, err = r.State(ctx, c.ID)
		require.ErrorIs(t, err, db.ErrNotFound, string(actor))
		list, err := r.List(ctx, cases.Filter{Project: project})
		require.NoError(t, err)
		require.Empty(t, list, string(actor))
		keys, err := r.Keys(ctx, c.ID)
		require.NoError(t, err)
		require.Empty(t, keys, string(actor))
	}
	v := e.as(t, vic)
	got, err := v.Get(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, c.Case, got)
	list, err := v.List(ctx, cases.Filter{Project: project, Status: cases.Open})
	require.NoError(t, err)
	require.Equal(t, []cases.Case{c.Case}, list)
	list, err = v.List(ctx, cases.Filter{Project: project, After: c.ID})
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestBreachNeedsJobCreate: a breach by hand enqueues the escalation as the
// actor, so an actor that may admit but not create jobs is refused.
func TestBreachNeedsJobCreate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.admit(t, key("document", "DOC-1"))
	o, err := e.app.RegisterObligation(ctx, c.ID, cases.ObligationSpec{Name: "ack", Due: t0,
		Escalation: &cases.Escalation{Kind: "case.escalate"}})
	require.NoError(t, err)
	_, err = e.Pool.Exec(ctx, `SELECT docket.grant_revoke('svc:app', 'acme', 'job.create', 'user:ops', $1)`, t0)
	require.NoError(t, err)
	before := snapshot(t, e.Pool)
	_, err = e.app.Breach(ctx, o.ID)
	require.ErrorIs(t, err, db.ErrNotPermitted)
	require.Equal(t, before, snapshot(t, e.Pool))
}
