package jobs

import (
	"encoding/json"
	"regexp"
	"time"
	"unicode"
	"unicode/utf8"
)

// Spec describes a job to enqueue. Only Kind and Payload are required.
type Spec struct {
	// Kind names what the job does: dot-separated segments of [a-z0-9_-],
	// each starting with a letter, at most 128 characters, e.g.
	// "billing.invoice". Kinds are open-world: docket does not register them.
	Kind string
	// Payload is the job's input, any JSON value up to [MaxPayloadBytes].
	// [Kind.Spec] encodes a typed payload.
	Payload json.RawMessage
	// PayloadSchema is the version of Payload's shape, so a worker never
	// decodes one version as another. Defaults to 1.
	PayloadSchema int
	// Queue is the queue the job waits in: 1-63 characters of [a-z0-9_-],
	// starting with a letter or digit. Defaults to "default".
	Queue string
	// Priority orders due jobs of a queue: 1 first .. 4 last. Defaults to 1.
	Priority int
	// IdempotencyKey, when set, makes the job unique in its project and kind:
	// enqueueing the key again returns the existing job (a duplicate) if it
	// is the same request in every field that changes what the job does
	// (payload, schema, params, inputs, output, Repeatable, External, lane,
	// case, compensation; not queue, priority, AvailableAt or Retry), and
	// refuses with [db.ErrIdempotencyConflict] naming the fields if not.
	// Up to 255 characters, no control characters.
	IdempotencyKey string
	// AvailableAt is the instant from which the job may be claimed. Defaults
	// to the client clock's now.
	AvailableAt time.Time
	// Retry is the job's retry policy, MaxAttempts included. The zero value
	// is [DefaultRetryPolicy].
	Retry RetryPolicy
	// Lease is how long a claim holds the job unless the claimant asks for
	// another: 1 s .. 24 h. Defaults to 5 minutes.
	Lease time.Duration
	// Repeatable declares the job safe to run again after its worker was
	// lost or reported an uncertain outcome: it is retried instead of being
	// left uncertain for someone to reconcile.
	Repeatable bool
	// External marks a job run by an executor outside docket's worker, which
	// claims it with [Client.Claim]; docket's worker never claims it.
	External bool
	// Params is optional typed metadata about the job (a JSON object up to
	// 64 KiB), kept beside the payload.
	Params json.RawMessage
	// Inputs are ordered references to what the job reads (up to 100).
	Inputs []string
	// Output names what the job is asked to produce: an asset, and
	// optionally its representation kind and the logical target root it is
	// written under. A job that requests an asset must be completed with a
	// [CompletionRecord] naming it (see [Client.CompleteWith]). The zero
	// value requests nothing.
	Output OutputRef
	// LaneID and CaseID link the job to a lane or a case (0: none). A lane
	// must be one of the job's project (else enqueueing is refused with
	// db.ErrMissingReference); it never gates a claim.
	LaneID int64
	CaseID int64
	// CompensationKind, when set, is the kind of a job enqueued when this one
	// is cancelled, with payload {"job_id", "kind", "payload"}: this job's id,
	// kind and payload (the payload left out when it is within 1 KiB of
	// [MaxPayloadBytes], for the handler to read by id).
	CompensationKind string
	// Budget caps what the job's attempts may spend, together (see
	// [Budget]). The zero value sets no ceiling.
	Budget Budget
}

// Bounds on what a job carries. docket.jobs' constraints enforce the same;
// Postgres' [[:cntrl:]] is wider than Go's unicode.IsControl, so the
// database may refuse an idempotency key Go let through (with
// [db.ErrInvalidArgument]). Diagnostics are cut by the database, not refused.
const (
	MaxPayloadBytes   = 1 << 20  // payload and result: bytes of canonical JSON text
	MaxParamsBytes    = 64 << 10 // params
	MaxKindLen        = 128
	MaxKeyLen         = 255
	MaxInputs         = 100
	MaxOutputLen      = 1000 // an output asset, in characters
	MaxOutputKindLen  = 128
	MaxTargetRootLen  = 200
	MaxDiagnosticLen  = 4096 // longer diagnostics are cut, marked with …
	MinLease          = time.Second
	MaxLease          = 24 * time.Hour
	DefaultLease      = 5 * time.Minute
	DefaultQueue      = "default"
	MaxEnqueueBatch   = 100000
	MaxClaimBatch     = 1000
	MaxCompleteBatch  = 1000
	MaxSweepBatch     = 10000
	MinPriority       = 1
	MaxPriority       = 4
	DefaultPriority   = 1
	DefaultSchema     = 1
	maxInputLen       = 1000
	maxDeploymentName = 200
)

var (
	kindPattern       = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$`)
	queuePattern      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	deploymentPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$`)
	outputKindPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+/:-]{0,127}$`)
	targetRootPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)
)

// ValidKind reports whether kind is a well-formed job kind.
func ValidKind(kind string) bool {
	return len(kind) <= MaxKindLen && kindPattern.MatchString(kind)
}

// ValidDeployment reports whether name is a well-formed deployment name for
// [Client.RegisterDecoders]: 1-200 characters of [A-Za-z0-9._:@/-], starting
// with a letter or digit.
func ValidDeployment(name string) bool { return deploymentPattern.MatchString(name) }

// ValidOutputKind reports whether kind is a well-formed representation kind
// of an output: 1-128 characters of [A-Za-z0-9._+/:-], starting with a
// letter or digit, e.g. "image/png" or "thumbnail.webp".
func ValidOutputKind(kind string) bool { return outputKindPattern.MatchString(kind) }

// ValidTargetRoot reports whether root is a well-formed logical target root:
// 1-200 characters of [A-Za-z0-9._-], starting with a letter or digit.
func ValidTargetRoot(root string) bool { return targetRootPattern.MatchString(root) }

// ValidQueue reports whether queue is a well-formed queue name.
func ValidQueue(queue string) bool { return queuePattern.MatchString(queue) }

// validKey mirrors jobs_idempotency_key_valid: 1-255 characters, none of them
// a control character.
func validKey(key string) bool {
	if !utf8.ValidString(key) || utf8.RuneCountInString(key) > MaxKeyLen {
		return false
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return false
		}
	}
	return key != ""
}

// Resolved returns s with its defaults applied, as enqueueing stores it: now
// stands for a zero AvailableAt.
func (s Spec) Resolved(now time.Time) Spec {
	if s.Queue == "" {
		s.Queue = DefaultQueue
	}
	if s.Priority == 0 {
		s.Priority = DefaultPriority
	}
	if s.PayloadSchema == 0 {
		s.PayloadSchema = DefaultSchema
	}
	if s.AvailableAt.IsZero() {
		s.AvailableAt = now
	}
	if s.Lease == 0 {
		s.Lease = DefaultLease
	}
	s.Retry = s.Retry.resolved()
	return s
}

// Validate refuses, with [db.ErrInvalidArgument] naming the field, a spec the
// database would refuse. Enqueueing validates every spec first, so a refusal
// writes nothing.
func (s Spec) Validate() error {
	s = s.Resolved(time.Unix(0, 0))
	switch {
	case !ValidKind(s.Kind):
		return invalid("invalid kind %q: want dot-separated segments of [a-z0-9_-] starting with a letter, at most %d characters", s.Kind, MaxKindLen)
	case !ValidQueue(s.Queue):
		return invalid("invalid queue %q: want 1-63 characters of [a-z0-9_-], starting with a letter or digit", s.Queue)
	case s.Priority < MinPriority || s.Priority > MaxPriority:
		return invalid("priority %d is outside %d..%d", s.Priority, MinPriority, MaxPriority)
	case len(s.Payload) == 0:
		return invalid("kind %s: payload is empty: want a JSON value", s.Kind)
	case !json.Valid(s.Payload):
		return invalid("kind %s: payload is not valid JSON", s.Kind)
	case len(s.Payload) > 4*MaxPayloadBytes:
		// Far over the bound however the database re-renders it.
		return invalid("kind %s: payload is %d bytes, over the bound of %d", s.Kind, len(s.Payload), MaxPayloadBytes)
	case s.PayloadSchema < 1 || s.PayloadSchema > math32:
		return invalid("kind %s: payload schema %d must be a positive 32-bit integer", s.Kind, s.PayloadSchema)
	case s.IdempotencyKey != "" && !validKey(s.IdempotencyKey):
		return invalid("kind %s: invalid idempotency key: want 1-%d characters, no control characters", s.Kind, MaxKeyLen)
	case s.Lease < MinLease || s.Lease > MaxLease:
		return invalid("kind %s: lease %v is outside %v .. %v", s.Kind, s.Lease, MinLease, MaxLease)
	case s.Params != nil && !validParams(s.Params):
		return invalid("kind %s: params must be a JSON object of at most %d bytes", s.Kind, MaxParamsBytes)
	case len(s.Inputs) > MaxInputs:
		return invalid("kind %s: %d inputs, over the bound of %d", s.Kind, len(s.Inputs), MaxInputs)
	case utf8.RuneCountInString(s.Output.Asset) > MaxOutputLen:
		return invalid("kind %s: requested output is over %d characters", s.Kind, MaxOutputLen)
	case s.Output.Kind != "" && !ValidOutputKind(s.Output.Kind):
		return invalid("kind %s: invalid requested output kind %q: want 1-%d characters of [A-Za-z0-9._+/:-], starting with a letter or digit", s.Kind, s.Output.Kind, MaxOutputKindLen)
	case s.Output.Root != "" && !ValidTargetRoot(s.Output.Root):
		return invalid("kind %s: invalid target root %q: want 1-%d characters of [A-Za-z0-9._-], starting with a letter or digit", s.Kind, s.Output.Root, MaxTargetRootLen)
	case s.Output.Asset == "" && (s.Output.Kind != "" || s.Output.Root != ""):
		return invalid("kind %s: a requested output kind or target root names no asset: set Output.Asset too", s.Kind)
	case s.LaneID < 0 || s.CaseID < 0:
		return invalid("kind %s: lane and case ids are positive (0: none)", s.Kind)
	case s.CompensationKind != "" && !ValidKind(s.CompensationKind):
		return invalid("kind %s: invalid compensation kind %q", s.Kind, s.CompensationKind)
	}
	if p := s.Budget.problem(); p != "" {
		return invalid("kind %s: %s", s.Kind, p)
	}
	for _, in := range s.Inputs {
		if utf8.RuneCountInString(in) > maxInputLen {
			return invalid("kind %s: an input reference is over %d characters", s.Kind, maxInputLen)
		}
	}
	return s.Retry.Validate()
}

const math32 = 1<<31 - 1

func validParams(p json.RawMessage) bool {
	if len(p) > 4*MaxParamsBytes || !json.Valid(p) {
		return false
	}
	for _, c := range p {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}
