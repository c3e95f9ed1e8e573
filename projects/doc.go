// Package projects manages docket's projects: the tenants that grants, jobs,
// lanes and cases belong to.
//
// A project's status moves along a small state machine held in SQL
// (docket.project_transitions):
//
//	active → archived → active
//	archived → retired   (terminal: a retired project never changes again)
//
// A trigger refuses every other move, and a project born in any state but
// active, also from a hand-written INSERT or UPDATE in psql, with
// [db.ErrIllegalTransition]; every creation and move is
// recorded in docket.project_events with the actor and instant of the change.
// This is the pattern every docket state machine follows.
package projects
