package plans

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// Plan is a graph of steps: data, validated in full and frozen before
// anything runs.
type Plan struct {
	Steps []Step `json:"steps"`
}

// Step is one node of a plan: a job of Kind, with arguments that each
// declare their source, run once every step of After succeeded.
type Step struct {
	// ID names the step in its plan: 1-63 characters of [a-z0-9._-],
	// starting with a letter.
	ID string `json:"id"`
	// Kind is the job kind the step enqueues.
	Kind string `json:"kind"`
	// Args are the job's payload fields, each from a declared source.
	Args []Arg `json:"args"`
	// After are the steps that must succeed first. Every step an argument
	// is sourced from must be among them or their predecessors.
	After []string `json:"after"`
	// Terminal steps are the run's end: the run has succeeded when every
	// terminal step has; its output is the lowest terminal id's result.
	Terminal bool `json:"terminal"`
	// Compensation, when set, is the job kind that undoes the step, run on
	// an unwind with the step's arguments and result.
	Compensation string `json:"compensation"`
	// Trusted requires every argument to be trusted; the step is refused,
	// naming the source, if it would not be.
	Trusted bool `json:"trusted"`
	// Repeatable declares the step's job safe to run again after its
	// worker was lost (see jobs.Spec.Repeatable): its lease's expiry queues
	// it again instead of leaving it uncertain, which would unwind the run.
	Repeatable bool `json:"repeatable"`
	// Wait, when set, makes the step a waiting step: it sleeps, awaits a
	// message or opens a human task instead of running a job. See [Wait].
	Wait *Wait `json:"wait,omitempty"`
}

// Arg is one named argument of a step and where its value comes from.
type Arg struct {
	Name   string `json:"name"`
	Source Source `json:"source"`
}

// SourceKind says where an argument's value comes from.
type SourceKind string

const (
	// FromStepResult: the whole result of a predecessor step.
	FromStepResult SourceKind = "step"
	// FromStepPath: the value at a path in a predecessor step's result.
	FromStepPath SourceKind = "path"
	// FromRunInput: the value at a path (empty: the whole) in the run's input.
	FromRunInput SourceKind = "input"
	// FromConstant: a constant, fixed in the plan.
	FromConstant SourceKind = "const"
)

// Source is where an argument's value comes from: build one with
// [StepResult], [StepPath], [Input] or [Const].
type Source struct {
	Kind  SourceKind      `json:"kind"`
	Step  string          `json:"step,omitempty"`
	Path  []string        `json:"path,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// StepResult is the whole result of step id.
func StepResult(id string) Source { return Source{Kind: FromStepResult, Step: id} }

// StepPath is the value at path in the result of step id.
func StepPath(id string, path ...string) Source {
	return Source{Kind: FromStepPath, Step: id, Path: path}
}

// Input is the value at path (none: all of it) in the run's input.
func Input(path ...string) Source { return Source{Kind: FromRunInput, Path: path} }

// Const is the constant v, JSON-encoded.
func Const(v any) Source {
	b, err := json.Marshal(v)
	if err != nil {
		panic("plans.Const: " + err.Error())
	}
	return Source{Kind: FromConstant, Value: b}
}

// Canonical is p's canonical form: its steps by id, each step's arguments
// by name and predecessors sorted and without repeats, constants compacted,
// as JSON with no HTML escaping. Two plans that mean the same have the same
// canonical form, and so the same [Digest].
func Canonical(p Plan) []byte {
	c := Plan{Steps: make([]Step, len(p.Steps))}
	for i, s := range p.Steps {
		s.Args = slices.Clone(s.Args)
		if s.Args == nil {
			s.Args = []Arg{}
		}
		for j, a := range s.Args {
			if a.Source.Value != nil {
				var b bytes.Buffer
				if json.Compact(&b, a.Source.Value) == nil {
					a.Source.Value = b.Bytes()
				}
			}
			if len(a.Source.Path) == 0 {
				a.Source.Path = nil
			}
			s.Args[j] = a
		}
		slices.SortStableFunc(s.Args, func(a, b Arg) int { return cmp.Compare(a.Name, b.Name) })
		s.After = slices.Compact(slices.Sorted(slices.Values(s.After)))
		if s.Wait != nil && s.Kind == "" {
			s.Kind = WaitKind(s.Wait.Type)
		}
		if s.After == nil {
			s.After = []string{}
		}
		c.Steps[i] = s
	}
	slices.SortStableFunc(c.Steps, func(a, b Step) int { return cmp.Compare(a.ID, b.ID) })
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		panic("plans.Canonical: " + err.Error()) // only json.RawMessage can fail, and Validate checks those
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// Digest is the sha256 of p's canonical form, in lowercase hex: the name
// under which the plan is stored, and which every run of it records.
func Digest(p Plan) string {
	return digestOf(Canonical(p))
}

// digestOf is the digest of a canonical form.
func digestOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}
