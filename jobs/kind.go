package jobs

import (
	"encoding/json"
	"fmt"

	"github.com/docket-dev/docket/db"
)

// Kind is a job kind with a typed payload: its name, the payload schema
// version this code writes and reads, and T, the payload's Go type, encoded
// as JSON. Declare one per kind, once:
//
//	var SendInvoice = jobs.MustKind[Invoice]("billing.invoice", 2)
//
// so enqueueing and handling never marshal by hand, and a job written under
// another schema version is refused instead of being decoded as this one.
type Kind[T any] struct {
	name   string
	schema int
}

// NewKind returns the kind name whose payloads are T at schema version
// schema. It refuses a malformed name or a schema below 1 with
// [db.ErrInvalidArgument].
func NewKind[T any](name string, schema int) (Kind[T], error) {
	if !ValidKind(name) {
		return Kind[T]{}, invalid("invalid kind %q: want dot-separated segments of [a-z0-9_-] starting with a letter, at most %d characters", name, MaxKindLen)
	}
	if schema < 1 || schema > math32 {
		return Kind[T]{}, invalid("kind %s: payload schema %d must be a positive 32-bit integer", name, schema)
	}
	return Kind[T]{name: name, schema: schema}, nil
}

// MustKind is [NewKind] for package-level declarations: it panics on a
// malformed name or schema.
func MustKind[T any](name string, schema int) Kind[T] {
	k, err := NewKind[T](name, schema)
	if err != nil {
		panic(err)
	}
	return k
}

// Name returns the kind's name.
func (k Kind[T]) Name() string { return k.name }

// Schema returns the payload schema version the kind writes and reads.
func (k Kind[T]) Schema() int { return k.schema }

// Decoder returns the (kind, schema) pair a claimant names to be handed only
// jobs it can decode.
func (k Kind[T]) Decoder() Decoder { return Decoder{Kind: k.name, Schema: k.schema} }

// Spec returns a spec of this kind carrying payload, encoded as JSON, with
// every other field at its default; set them on the result. It refuses a
// payload that does not encode with [db.ErrInvalidArgument].
func (k Kind[T]) Spec(payload T) (Spec, error) {
	if k.name == "" {
		return Spec{}, invalid("the zero Kind has no name: declare kinds with NewKind or MustKind")
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return Spec{}, invalid("kind %s: payload does not encode as JSON: %v", k.name, err)
	}
	return Spec{Kind: k.name, PayloadSchema: k.schema, Payload: b}, nil
}

// Typed is a job with its payload decoded.
type Typed[T any] struct {
	Job
	Args T
}

// Decode returns j with its payload decoded as T. It refuses a job of another
// kind or payload schema with [db.ErrRefusedRevision], and a payload that does
// not decode as T with [db.ErrInvalidArgument].
func (k Kind[T]) Decode(j Job) (*Typed[T], error) {
	if j.Kind != k.name || j.PayloadSchema != k.schema {
		return nil, db.Refuse(db.ErrRefusedRevision, "job.decode",
			fmt.Sprintf("job is %s schema %d; this code decodes %s schema %d", j.Kind, j.PayloadSchema, k.name, k.schema), "job", j.ID)
	}
	var v T
	if err := json.Unmarshal(j.Payload, &v); err != nil {
		return nil, db.Refuse(db.ErrInvalidArgument, "job.decode", fmt.Sprintf("payload does not decode as %T: %v", v, err), "job", j.ID)
	}
	return &Typed[T]{Job: j, Args: v}, nil
}
