package engine

import (
	"fmt"
	"slices"
	"strings"
)

// Operator actions as specs derived from the transition table: the one
// place that decides a state. An ActionSpec says which states an action
// takes a job from, where to, with which event, what else the write does
// to the job, and what refuses it. Stores apply specs; they never list
// states of their own.

// Effect is something an operator write does to a job beside its state.
type Effect uint

const (
	// EffectClearLease clears the lease (a running job leaves running).
	EffectClearLease Effect = 1 << iota
	// EffectScheduleNow sets scheduled_at to the store's now.
	EffectScheduleNow
	// EffectFinalize sets finalized_at to now and the terminal reason.
	EffectFinalize
	// EffectReopen clears finalized_at and the terminal reason.
	EffectReopen
	// EffectOneMoreAttempt sets max_attempts to max(max_attempts,
	// attempt+1) and drops a deadline that has passed unless a new one is
	// given.
	EffectOneMoreAttempt
	// EffectResetCrashes sets crash_attempt to 0.
	EffectResetCrashes
	// EffectDelete removes the row.
	EffectDelete
)

// Refusal is a condition that refuses an operator write on a job.
type Refusal uint

const (
	// RefuseQuarantined: the job's fingerprint is quarantined
	// (ErrQuarantined).
	RefuseQuarantined Refusal = 1 << iota
	// RefuseSuperseded: the job was retried with new input or replayed
	// from a step, unless the action is forced (ErrConflict).
	RefuseSuperseded
)

// ActionSpec is one operator action, derived from its row of the table.
type ActionSpec struct {
	Action  Action
	Trigger Trigger
	From    []State
	To      State
	Reason  TerminalReason
	// Event is the timeline entry each changed job gets; "" for none (the
	// job is gone).
	Event   EventKind
	Effects Effect
	Refuse  Refusal
}

// Has reports whether the spec has effect x.
func (s ActionSpec) Has(x Effect) bool { return s.Effects&x != 0 }

// Refuses reports whether the spec has refusal r.
func (s ActionSpec) Refuses(r Refusal) bool { return s.Refuse&r != 0 }

// Allows reports whether the spec takes a job from state st.
func (s ActionSpec) Allows(st State) bool { return slices.Contains(s.From, st) }

// actionTriggers names the table's trigger of each action.
var actionTriggers = map[Action]Trigger{
	ActionRetry:   TriggerOperatorRetry,
	ActionCancel:  TriggerOperatorCancel,
	ActionDelete:  TriggerOperatorDelete,
	ActionRelease: TriggerOperatorRelease,
}

// Actions lists the operator actions in a stable order.
var Actions = []Action{ActionRetry, ActionCancel, ActionDelete, ActionRelease}

// SpecFor returns the spec of action a, derived from Transitions.
func SpecFor(a Action) (ActionSpec, error) { return specFrom(Transitions, a) }

// specFrom derives a's spec from table.
func specFrom(table []Transition, a Action) (ActionSpec, error) {
	t, ok := actionTriggers[a]
	if !ok {
		return ActionSpec{}, fmt.Errorf("%w: unknown action %q (retry, cancel, delete, release)", ErrInvalid, a)
	}
	var row *Transition
	for i := range table {
		if table[i].Trigger == t && table[i].Operator {
			if row != nil {
				return ActionSpec{}, fmt.Errorf("%w: two rows for %s", ErrInvalidTransition, t)
			}
			row = &table[i]
		}
	}
	if row == nil {
		return ActionSpec{}, fmt.Errorf("%w: no operator row for %s", ErrInvalidTransition, t)
	}
	spec := ActionSpec{
		Action: a, Trigger: t, From: slices.Clone(row.From), To: row.To, Reason: row.Reason,
		Event: row.Event, Effects: row.Effects, Refuse: row.Refuse,
	}
	// What follows from the states alone.
	switch {
	case row.To == StateDeleted:
		spec.Effects |= EffectDelete
	case row.To.Terminal():
		spec.Effects |= EffectFinalize
	}
	if row.To == StateAvailable {
		spec.Effects |= EffectScheduleNow
		if slices.ContainsFunc(row.From, State.Terminal) {
			spec.Effects |= EffectReopen
		}
	}
	if row.To != StateDeleted && slices.Contains(row.From, StateRunning) {
		spec.Effects |= EffectClearLease
	}
	return spec, nil
}

// Narrow restricts a selector to the states the spec changes. It reports
// false when none is left.
func (s ActionSpec) Narrow(f Filter) (Filter, bool) {
	if len(f.States) == 0 {
		f.States = slices.Clone(s.From)
		return f, true
	}
	var keep []State
	for _, st := range f.States {
		if s.Allows(st) {
			keep = append(keep, st)
		}
	}
	f.States = keep
	return f, len(keep) > 0
}

// BulkSelector narrows a selector to the states its action changes. It
// reports false when none is left or the action is unknown.
func BulkSelector(a Action, f Filter) (Filter, bool) {
	spec, err := SpecFor(a)
	if err != nil {
		return f, false
	}
	return spec.Narrow(f)
}

// Refusals a store reports. Each carries the facts; the text is written
// here.

// StateError: the job is not in a state the action takes.
type StateError struct {
	Action  Action
	ID      string
	State   State
	Allowed []State
}

func (e *StateError) Error() string {
	names := make([]string, len(e.Allowed))
	for i, s := range e.Allowed {
		names[i] = string(s)
	}
	return fmt.Sprintf("%s job %s: %v: it is %s; %s applies to %s", e.Action, e.ID, ErrWrongState, e.State, e.Action,
		strings.Join(names, ", "))
}

func (e *StateError) Unwrap() error { return ErrWrongState }

// SupersededError: the job was superseded by By, its retry with new input
// or its replay from a step.
type SupersededError struct {
	ID, By string
}

func (e *SupersededError) Error() string {
	return fmt.Sprintf("retry job %s: %v: it is superseded by %s, its retry with new input or replay (force to retry it anyway, and run its side effects again)", e.ID, ErrConflict, e.By)
}

func (e *SupersededError) Unwrap() error { return ErrConflict }

// QuarantinedError: the job's fingerprint is quarantined.
type QuarantinedError struct {
	Verb        string
	ID          string
	Fingerprint string
}

func (e *QuarantinedError) Error() string {
	return fmt.Sprintf("%s job %s: %v: %s", e.Verb, e.ID, ErrQuarantined, e.Fingerprint)
}

func (e *QuarantinedError) Unwrap() error { return ErrQuarantined }

// VersionError: the job changed since the version an edit was made on.
type VersionError struct {
	ID         string
	Have, Want int64
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("edit payload of job %s: %v: the job changed (version %d, the edit was made on %d)", e.ID, ErrConflict, e.Have, e.Want)
}

func (e *VersionError) Unwrap() error { return ErrConflict }
