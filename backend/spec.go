package backend

import (
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/sluicetype"
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
	Action  sluicetype.Action
	Trigger Trigger
	From    []sluicetype.State
	To      sluicetype.State
	Reason  sluicetype.TerminalReason
	// Event is the timeline entry each changed job gets; "" for none (the
	// job is gone).
	Event   sluicetype.EventKind
	Effects Effect
	Refuse  Refusal
}

// Has reports whether the spec has effect x.
func (s ActionSpec) Has(x Effect) bool { return s.Effects&x != 0 }

// Refuses reports whether the spec has refusal r.
func (s ActionSpec) Refuses(r Refusal) bool { return s.Refuse&r != 0 }

// Allows reports whether the spec takes a job from state st.
func (s ActionSpec) Allows(st sluicetype.State) bool { return slices.Contains(s.From, st) }

// MayTakeUniqueKey reports whether the action can move a job from a state
// that may not hold its unique key into one that may: only such a move
// can collide with another holder, and a store refuses it with a
// *sluicetype.UniqueHeldError (an operator's retry of a dead job). Moves
// among sluicetype.RequiredUniqueStates never collide: a job holds its
// key in all of them.
func (s ActionSpec) MayTakeUniqueKey() bool {
	if sluicetype.UniqueStateBit(s.To) == 0 {
		return false
	}
	for _, st := range s.From {
		if !slices.Contains(sluicetype.RequiredUniqueStates, st) {
			return true
		}
	}
	return false
}

// actionTriggers names the table's trigger of each action.
var actionTriggers = map[sluicetype.Action]Trigger{
	sluicetype.ActionRetry:   TriggerOperatorRetry,
	sluicetype.ActionCancel:  TriggerOperatorCancel,
	sluicetype.ActionDelete:  TriggerOperatorDelete,
	sluicetype.ActionRelease: TriggerOperatorRelease,
}

// SpecFor returns the spec of action a, derived from Transitions.
func SpecFor(a sluicetype.Action) (ActionSpec, error) { return specFrom(Transitions, a) }

// specFrom derives a's spec from table.
func specFrom(table []Transition, a sluicetype.Action) (ActionSpec, error) {
	t, ok := actionTriggers[a]
	if !ok {
		return ActionSpec{}, fmt.Errorf("%w: unknown action %q (retry, cancel, delete, release)", sluicetype.ErrInvalid, a)
	}
	var row *Transition
	for i := range table {
		if table[i].Trigger == t && table[i].Operator {
			if row != nil {
				return ActionSpec{}, fmt.Errorf("%w: two rows for %s", sluicetype.ErrInvalidTransition, t)
			}
			row = &table[i]
		}
	}
	if row == nil {
		return ActionSpec{}, fmt.Errorf("%w: no operator row for %s", sluicetype.ErrInvalidTransition, t)
	}
	spec := ActionSpec{
		Action: a, Trigger: t, From: slices.Clone(row.From), To: row.To, Reason: row.Reason,
		Event: row.Event, Effects: row.Effects, Refuse: row.Refuse,
	}
	// What follows from the states alone.
	switch {
	case row.To == sluicetype.StateDeleted:
		spec.Effects |= EffectDelete
	case row.To.Terminal():
		spec.Effects |= EffectFinalize
	}
	if row.To == sluicetype.StateAvailable {
		spec.Effects |= EffectScheduleNow
		if slices.ContainsFunc(row.From, sluicetype.State.Terminal) {
			spec.Effects |= EffectReopen
		}
	}
	if row.To != sluicetype.StateDeleted && slices.Contains(row.From, sluicetype.StateRunning) {
		spec.Effects |= EffectClearLease
	}
	return spec, nil
}

// Narrow restricts a selector to the states the spec changes. It reports
// false when none is left.
func (s ActionSpec) Narrow(f sluicetype.Filter) (sluicetype.Filter, bool) {
	if len(f.States) == 0 {
		f.States = slices.Clone(s.From)
		return f, true
	}
	var keep []sluicetype.State
	for _, st := range f.States {
		if s.Allows(st) {
			keep = append(keep, st)
		}
	}
	f.States = keep
	return f, len(keep) > 0
}

// Refusals a store reports. Each carries the facts; the text is written
// here.

// EditableStates are the states whose payload JobUpdatePayload edits:
// every state but running (a running job's handler has read it).
func EditableStates() []sluicetype.State {
	var out []sluicetype.State
	for _, st := range sluicetype.AllStates {
		if st != sluicetype.StateRunning {
			out = append(out, st)
		}
	}
	return out
}

// PayloadNotEditable is JobUpdatePayload's refusal of job id in state st.
func PayloadNotEditable(id string, st sluicetype.State) error {
	return &sluicetype.StateError{Action: "edit payload of", ID: id, State: st, Allowed: EditableStates()}
}
