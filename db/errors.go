package db

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The docket error catalogue. Functions in schema docket raise these as SQLSTATE
// class DK; [Translate] maps each code to its sentinel so callers can test with
// [errors.Is]. The same catalogue is readable in SQL as docket.error_codes.
var (
	// ErrIllegalTransition (DK001): the (from, to) pair is not in the machine's
	// transition table, or the row is in a terminal state.
	ErrIllegalTransition = errors.New("illegal transition")
	// ErrStaleClaim (DK002): the token does not hold the current lease
	// (expired, replaced, released), or the caller's handler revision is not
	// the one that claimed it.
	ErrStaleClaim = errors.New("stale claim")
	// ErrIdempotencyConflict (DK003): same idempotency key, different payload.
	ErrIdempotencyConflict = errors.New("idempotency conflict")
	// ErrVersionConflict (DK004): case state was written by someone else since
	// it was read.
	ErrVersionConflict = errors.New("version conflict")
	// ErrCaseClosed (DK005): a write that would give a closed case a duty.
	ErrCaseClosed = errors.New("case closed")
	// ErrObligationsOutstanding (DK006): closing a case with pending obligations.
	ErrObligationsOutstanding = errors.New("obligations outstanding")
	// ErrAlreadyAnswered (DK007): a task was settled first by another answer or
	// by expiry.
	ErrAlreadyAnswered = errors.New("already answered")
	// ErrExcludedActor (DK008): four eyes: the actor may not claim or answer
	// this human task (it proposed it, admitted its case, or acts for
	// someone in it).
	ErrExcludedActor = errors.New("excluded actor")

	// ErrNotPermitted (DK009): the actor lacks the role or grant.
	ErrNotPermitted = errors.New("not permitted")
	// ErrInvalidArgument (DK010, and check, not-null and malformed-value
	// violations): bad name, size, interval, schedule, time zone; the message
	// says which.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrAmbiguousCorrelation (DK011): keys point at two different open cases.
	ErrAmbiguousCorrelation = errors.New("ambiguous correlation")
	// ErrRefusedRevision (DK012): a payload schema or handler revision this
	// deployment does not know.
	ErrRefusedRevision = errors.New("refused revision")
	// ErrInvalidDependency (DK013): cross-quorum or cyclic dependency, unknown
	// predecessor.
	ErrInvalidDependency = errors.New("invalid dependency")
	// ErrTerminal (DK014): re-completing a finished job or lane with a
	// different outcome.
	ErrTerminal = errors.New("terminal")
	// ErrImmutable (DK015): a change to an immutable column, or an update or
	// delete of an append-only record.
	ErrImmutable = errors.New("immutable")
	// ErrClockSkew (DK016): the caller's instant is further from the
	// database's clock than the clock_skew setting allows (for a login that
	// is not a member of docket_clock), or it runs a record backwards: a
	// completion dated before its claim, an event before the one before it.
	ErrClockSkew = errors.New("clock skew")
)

// Sentinels for conditions Postgres itself reports, translated by [Translate]
// like the DK class.
var (
	// ErrNotFound: no row (pgx.ErrNoRows), or a docket function reported that
	// what it was asked about does not exist (SQLSTATE P0002).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a unique constraint refused the write (23505).
	ErrAlreadyExists = errors.New("already exists")
	// ErrMissingReference: a foreign key refused the write because the row it
	// names does not exist, or a delete because rows still name it (23503).
	ErrMissingReference = errors.New("missing reference")
	// ErrSerialization: the transaction lost a race with a concurrent one
	// and nothing it wrote was committed: a serialization failure (40001),
	// which a REPEATABLE READ or SERIALIZABLE transaction gets when a row a
	// rule depends on was written since its snapshot, or a deadlock
	// (40P01). Run the whole transaction again, from its first read: a
	// fresh snapshot sees what the winner committed, and the rule then
	// decides on it. [Retryable] says whether an error is one.
	ErrSerialization = errors.New("serialization failure")
	// ErrReadOnly: the write reached a server that takes no writes (25006,
	// read_only_sql_transaction): a standby, a replica's pool given where
	// the primary's belongs, or a READ ONLY transaction. Nothing was written.
	// Writes go to the primary; a client's Replica (see docs/cells.md)
	// takes only its reads.
	ErrReadOnly = errors.New("read only")
)

// CodeInfo describes one entry of the DK catalogue.
type CodeInfo struct {
	Code     string // the SQLSTATE, e.g. "DK001"
	Name     string // the Go sentinel's name, e.g. "ErrIllegalTransition"
	Sentinel error
}

// Catalogue lists the DK codes in order. It is the Go side of docket.error_codes.
var Catalogue = []CodeInfo{
	{"DK001", "ErrIllegalTransition", ErrIllegalTransition},
	{"DK002", "ErrStaleClaim", ErrStaleClaim},
	{"DK003", "ErrIdempotencyConflict", ErrIdempotencyConflict},
	{"DK004", "ErrVersionConflict", ErrVersionConflict},
	{"DK005", "ErrCaseClosed", ErrCaseClosed},
	{"DK006", "ErrObligationsOutstanding", ErrObligationsOutstanding},
	{"DK007", "ErrAlreadyAnswered", ErrAlreadyAnswered},
	{"DK008", "ErrExcludedActor", ErrExcludedActor},
	{"DK009", "ErrNotPermitted", ErrNotPermitted},
	{"DK010", "ErrInvalidArgument", ErrInvalidArgument},
	{"DK011", "ErrAmbiguousCorrelation", ErrAmbiguousCorrelation},
	{"DK012", "ErrRefusedRevision", ErrRefusedRevision},
	{"DK013", "ErrInvalidDependency", ErrInvalidDependency},
	{"DK014", "ErrTerminal", ErrTerminal},
	{"DK015", "ErrImmutable", ErrImmutable},
	{"DK016", "ErrClockSkew", ErrClockSkew},
}

// Postgres SQLSTATEs outside class DK that have a docket meaning.
const (
	codeNoDataFound        = "P0002"
	codeUniqueViolation    = "23505"
	codeForeignKey         = "23503"
	codeCheckViolation     = "23514"
	codeNotNullViolation   = "23502"
	codeStringTooLong      = "22001"
	codeInvalidText        = "22P02"
	codeNumericOutOfRange  = "22003"
	codeDatetimeOutOfRange = "22008"
	codeInvalidJSON        = "22032"
	codeBadCharacter       = "22021"
	// codeInsufficientPrivilege is Postgres refusing a role a table or a
	// function: docket's roles reach what they may through the API alone.
	codeInsufficientPrivilege = "42501"
	codeSerializationFailure  = "40001"
	codeDeadlockDetected      = "40P01"
	codeReadOnly              = "25006"
)

var sentinelByCode = func() map[string]error {
	m := map[string]error{
		codeNoDataFound:        ErrNotFound,
		codeUniqueViolation:    ErrAlreadyExists,
		codeForeignKey:         ErrMissingReference,
		codeCheckViolation:     ErrInvalidArgument,
		codeNotNullViolation:   ErrInvalidArgument,
		codeStringTooLong:      ErrInvalidArgument,
		codeInvalidText:        ErrInvalidArgument,
		codeNumericOutOfRange:  ErrInvalidArgument,
		codeDatetimeOutOfRange: ErrInvalidArgument,
		codeInvalidJSON:        ErrInvalidArgument,
		codeBadCharacter:       ErrInvalidArgument,

		codeInsufficientPrivilege: ErrNotPermitted,

		codeSerializationFailure: ErrSerialization,
		codeDeadlockDetected:     ErrSerialization,

		codeReadOnly: ErrReadOnly,
	}
	for _, c := range Catalogue {
		m[c.Code] = c.Sentinel
	}
	return m
}()

// Error is a refusal from the database, translated. It matches its sentinel
// with [errors.Is] and the underlying *pgconn.PgError (when there is one) with
// [errors.As].
type Error struct {
	Op       string // what was attempted, e.g. "project.create"
	IDs      []any  // the ids involved, as alternating name, value pairs
	Sentinel error  // one of the Err… values of this package
	Code     string // SQLSTATE, empty for pgx.ErrNoRows
	Message  string // the database's message
	// Constraint names the violated constraint, for class 23 errors.
	Constraint string
	// Actor, on the [ErrNotFound] of a read by id (see [NotVisible]), is who
	// asked: the thing is not there, or not visible to Actor.
	Actor string
	Err   error // the error as pgx returned it
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Actor != "" && e.Sentinel == ErrNotFound {
		// The message says it all: "job 42 not found or not visible to user:ana".
		b.WriteString(e.Op)
		b.WriteString(": ")
		b.WriteString(e.Message)
		if e.Code != "" {
			fmt.Fprintf(&b, " [%s]", e.Code)
		}
		return b.String()
	}
	b.WriteString(opWithIDs(e.Op, e.IDs))
	b.WriteString(": ")
	b.WriteString(e.Sentinel.Error())
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Constraint != "" && !strings.Contains(e.Message, e.Constraint) {
		fmt.Fprintf(&b, " (constraint %s)", e.Constraint)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " [%s]", e.Code)
	}
	return b.String()
}

// Unwrap returns the sentinel and the underlying error.
func (e *Error) Unwrap() []error { return []error{e.Sentinel, e.Err} }

// Translate turns an error from pgx into an [*Error] carrying the docket
// sentinel for its SQLSTATE, the operation op and the ids involved (given as
// alternating name, value pairs, like log/slog attributes). Errors with no
// docket meaning (a lost connection, a syntax error) are wrapped with op and
// the ids but keep their own identity. Translate(nil, …) is nil, and an error
// already translated is returned as it is.
func Translate(err error, op string, ids ...any) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &Error{Op: op, IDs: ids, Sentinel: ErrNotFound, Err: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if sentinel, ok := sentinelByCode[pgErr.Code]; ok {
			return &Error{
				Op:         op,
				IDs:        ids,
				Sentinel:   sentinel,
				Code:       pgErr.Code,
				Message:    pgErr.Message,
				Constraint: pgErr.ConstraintName,
				Err:        err,
			}
		}
	}
	return fmt.Errorf("%s: %w", opWithIDs(op, ids), err)
}

// opWithIDs renders an operation and its ids as "op name=value …".
func opWithIDs(op string, ids []any) string {
	var b strings.Builder
	b.WriteString(op)
	for i := 0; i+1 < len(ids); i += 2 {
		fmt.Fprintf(&b, " %v=%v", ids[i], ids[i+1])
	}
	return b.String()
}

// NotVisible builds the [ErrNotFound] of a read of noun id on behalf of actor
// that found nothing, worded "job 42 not found or not visible to user:ana".
// docket answers an unknown id and one the actor may not read alike, so a
// reader learns nothing of what it may not see; the message names the actor,
// whose grants are the first thing to check.
func NotVisible(op, noun string, id any, actor string) error {
	return &Error{Op: op, IDs: []any{noun, id}, Sentinel: ErrNotFound, Actor: actor,
		Message: fmt.Sprintf("%s %v not found or not visible to %s", noun, id, actor)}
}

// TranslateRead is [Translate] for a read of noun id on behalf of actor: when
// the read found nothing (no row, or P0002) the error is [NotVisible]'s,
// still wrapping what pgx returned. Any other error is Translate's.
func TranslateRead(err error, op, noun string, id any, actor string) error {
	err = Translate(err, op, noun, id)
	var e *Error
	if !errors.As(err, &e) || e.Sentinel != ErrNotFound {
		return err
	}
	nv := NotVisible(op, noun, id, actor).(*Error)
	nv.Code, nv.Err = e.Code, e.Err
	return nv
}

// Refuse builds an [*Error] for a refusal decided in Go before reaching the
// database (an early, clearer check; the database enforces the same rule).
func Refuse(sentinel error, op, message string, ids ...any) error {
	return &Error{Op: op, IDs: ids, Sentinel: sentinel, Message: message}
}

// RefuseCode builds an [*Error] for a refusal the database reported as a value
// rather than raised, such as one element's outcome in a batch, from its
// SQLSTATE. A code with no docket meaning gets no sentinel match beyond the
// error itself.
func RefuseCode(code, op, message string, ids ...any) error {
	sentinel, ok := sentinelByCode[code]
	if !ok {
		sentinel = fmt.Errorf("SQLSTATE %s", code)
	}
	return &Error{Op: op, IDs: ids, Sentinel: sentinel, Code: code, Message: message}
}

// Retryable reports whether err means the transaction that returned it lost
// a race and committed nothing, so that running it again, from its first
// statement, may succeed: [ErrSerialization], translated or still the
// *pgconn.PgError of a serialization failure (40001) or a deadlock (40P01).
// A refusal of the DK class is never retryable: the rule decided.
func Retryable(err error) bool {
	if errors.Is(err, ErrSerialization) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == codeSerializationFailure || pgErr.Code == codeDeadlockDetected)
}
