package sluicetype

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// UniqueOpts makes an enqueue unique: while a job with the same unique key
// is in one of States, enqueueing another returns that job (Existing set)
// instead of writing a new one, as an enqueue of an existing id does. The
// key is a hash of the kind (unless ExcludeKind), the queue (ByQueue), the
// payload (ByPayload, or only the top-level Fields named) and the period
// bucket the job's due time falls in (Period). The store holds the key
// atomically (a partial unique index, a key set inside the insert
// script): two enqueues racing never both write.
type UniqueOpts struct {
	// ExcludeKind leaves the kind out of the key, so jobs of different
	// kinds share it.
	ExcludeKind bool
	// ByQueue puts the queue in the key.
	ByQueue bool
	// ByPayload puts the whole canonical payload in the key.
	ByPayload bool
	// Fields puts only these top-level payload fields in the key; each
	// must be in the payload. It cannot be combined with ByPayload.
	Fields []string
	// Period, when set, makes the key one per period: the job's due time
	// (ScheduledAt, or the store's now plus Delay) is truncated to a
	// multiple of Period since the Unix epoch, in UTC. It must be a whole
	// number of seconds.
	Period time.Duration
	// States are the states in which a job holds its key; empty means
	// DefaultUniqueStates. They must include every state of
	// RequiredUniqueStates (a job moves between those without an
	// operator, and no such move may collide), and may add terminal
	// states (completed: one success per period, ever).
	States []State
}

// RequiredUniqueStates are the states every unique job holds its key in:
// the states a job moves between on its own (scheduled, available,
// running, retryable) and quarantined, from which a release returns it to
// available. Only an operator's retry moves a job from outside these into
// them, and that retry is refused with a *UniqueHeldError when another job
// holds the key.
var RequiredUniqueStates = []State{StateScheduled, StateAvailable, StateRunning, StateRetryable, StateQuarantined}

// DefaultUniqueStates are the states a key is held in when UniqueOpts
// names none: not yet finished, RequiredUniqueStates.
var DefaultUniqueStates = RequiredUniqueStates

// UniqueStateBit is the bit of state s in a unique-states mask: its place
// in AllStates. Stores keep the mask beside the key and hold the key only
// while the job's state's bit is set (the partial index of the SQL stores
// spells the same mapping out as a CASE).
func UniqueStateBit(s State) int64 {
	for i, v := range AllStates {
		if v == s {
			return 1 << i
		}
	}
	return 0
}

// UniqueStatesMask is the mask of states.
func UniqueStatesMask(states []State) int64 {
	var m int64
	for _, s := range states {
		m |= UniqueStateBit(s)
	}
	return m
}

// UniqueMaskHolds reports whether a job in state s holds its key under
// mask.
func UniqueMaskHolds(mask int64, s State) bool {
	return mask&UniqueStateBit(s) != 0
}

// UniqueKeyOf validates o against the job and returns its unique key and
// states mask. due is the job's due time (for Period). Errors wrap
// ErrInvalid and name the job and what is wrong.
func UniqueKeyOf(o *UniqueOpts, id, kind, queue string, payload json.RawMessage, due time.Time) (string, int64, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("job %s of kind %s: unique: %w: %s", id, kind, ErrInvalid, fmt.Sprintf(format, a...))
	}
	if o.ByPayload && len(o.Fields) > 0 {
		return "", 0, bad("ByPayload and Fields are exclusive (the whole payload already includes every field)")
	}
	if o.Period < 0 || o.Period%time.Second != 0 {
		return "", 0, bad("period %s is not a whole number of seconds", o.Period)
	}
	states := o.States
	if len(states) == 0 {
		states = DefaultUniqueStates
	}
	for _, s := range states {
		if !s.Valid() {
			return "", 0, bad("state %q is not a stored state", s)
		}
	}
	for _, r := range RequiredUniqueStates {
		if !slices.Contains(states, r) {
			return "", 0, bad("states must include %s (a job moves through it without an operator)", r)
		}
	}
	h := sha256.New()
	part := func(name, v string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write([]byte(name))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	part("v", "1")
	if !o.ExcludeKind {
		part("kind", kind)
	}
	if o.ByQueue {
		part("queue", queue)
	}
	if o.ByPayload {
		c, err := CanonicalJSON(payload)
		if err != nil {
			return "", 0, bad("payload: %v", err)
		}
		part("payload", string(c))
	}
	if len(o.Fields) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(payload, &obj); err != nil {
			return "", 0, bad("payload is not an object: %v", err)
		}
		fields := slices.Clone(o.Fields)
		slices.Sort(fields)
		fields = slices.Compact(fields)
		var missing []string
		for _, f := range fields {
			v, ok := obj[f]
			if !ok {
				missing = append(missing, f)
				continue
			}
			c, err := CanonicalJSON(v)
			if err != nil {
				return "", 0, bad("payload field %q: %v", f, err)
			}
			part("field", f)
			part("value", string(c))
		}
		if len(missing) > 0 {
			return "", 0, bad("payload has no field %s", strings.Join(quoteAll(missing), ", "))
		}
	}
	if o.Period > 0 {
		p := int64(o.Period / time.Second)
		sec := due.Unix()
		bucket := sec - ((sec%p)+p)%p
		part("period", fmt.Sprintf("%d/%d", bucket, p))
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), UniqueStatesMask(states), nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// UniqueHeldError refuses a write that would put a job into a state that
// holds its unique key while another job (HolderID) holds that key: an
// operator's retry of a dead job whose duplicate was enqueued since.
type UniqueHeldError struct {
	Verb     string // "retry"
	ID       string
	Key      string
	HolderID string
}

func (e *UniqueHeldError) Error() string {
	// The holder first: a console's toast cut to its width still names it.
	return fmt.Sprintf("%s job %s: %v: live job %s holds its unique key %s", e.Verb, e.ID, ErrConflict, e.HolderID, e.Key)
}

// Unwrap makes the error match ErrConflict.
func (e *UniqueHeldError) Unwrap() error { return ErrConflict }
