package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Outcome is a worker outcome as a check writes it: the row of the table
// and the texts. plan resolves it into the backend.JobFinishParams a store
// applies, the way the engine resolves a handler's outcome, so the checks
// drive JobFinish with complete plans and the store decides nothing.
type Outcome struct {
	backend.JobRef
	To         engine.State
	Reason     engine.TerminalReason
	Charge     backend.Charge
	Delay      time.Duration
	Quarantine bool
	// Error is the attempt's error entry; ErrorPattern its pattern.
	Error        *engine.AttemptError
	ErrorPattern string
	Event        engine.EventKind
	Actor        string
	Message      string

	IfLeaseExpired, IfWorkerGone bool
}

// Plan resolves o against j, the job as it is running (its queue, kind,
// attempt and fingerprint).
func (o Outcome) Plan(j *engine.Job) *backend.JobFinishParams {
	p := &backend.JobFinishParams{
		JobRef: o.JobRef, To: o.To, Reason: o.Reason, Charge: o.Charge, Delay: o.Delay,
		IfLeaseExpired: o.IfLeaseExpired, IfWorkerGone: o.IfWorkerGone,
		Finalize: o.To.Terminal(),
		Counts:   []backend.CountDelta{{Queue: j.Queue, From: engine.StateRunning, To: o.To, N: 1}},
	}
	switch o.To {
	case engine.StateAvailable:
		p.Schedule = backend.ScheduleNow
	case engine.StateRetryable, engine.StateScheduled:
		p.Schedule = backend.ScheduleAfter
	}
	if o.To == engine.StateDeleted {
		return p
	}
	run := j.Attempt + 1
	msg := o.Message
	if o.Error != nil {
		e := *o.Error
		e.Attempt = run
		if e.Worker == "" {
			e.Worker = o.Actor
		}
		p.Error = &backend.ErrorWrite{Entry: e, Keep: engine.MaxKeptErrors, LastError: e.Message, Pattern: o.ErrorPattern}
		if msg == "" {
			msg = e.Message
		}
	}
	if o.Event != "" {
		p.Event = &backend.EventWrite{Kind: o.Event, Actor: o.Actor, From: engine.StateRunning, To: o.To, Attempt: run, Message: msg}
	}
	if j.Fingerprint != "" && (o.Quarantine || o.Charge == backend.ChargeCrash) {
		f := &backend.FingerprintWrite{Fingerprint: j.Fingerprint, Kind: j.Kind, Quarantine: o.Quarantine,
			LastError: msg, LastJobID: j.ID}
		if o.Charge == backend.ChargeCrash {
			f.AddCrashes = 1
		}
		if o.Quarantine {
			f.Hold = &backend.HoldWrite{
				From:   []engine.State{engine.StateScheduled, engine.StateAvailable, engine.StateRetryable},
				To:     engine.StateQuarantined,
				Reason: engine.ReasonQuarantined,
				Event:  backend.EventWrite{Kind: engine.EventHeld, Actor: o.Actor, Message: "fingerprint quarantined"},
			}
		}
		p.Fingerprint = f
	}
	return p
}

// PlanOf resolves o against the job as the store has it now.
func PlanOf(t testing.TB, s backend.Store, o Outcome) *backend.JobFinishParams {
	t.Helper()
	j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: o.ID})
	if err != nil {
		// A job that is gone still gets a plan: the store refuses it.
		j = &engine.Job{ID: o.ID}
	}
	return o.Plan(j)
}

// finish applies o and fails the check on an error.

// actionSpec is the engine's spec of a, for checks that call JobAction.
func actionSpec(t testing.TB, a engine.Action) backend.ActionSpec {
	t.Helper()
	spec, err := backend.SpecFor(a)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// releasePlan is the engine's release of fingerprint fp by actor.
func releasePlan(t testing.TB, fp, actor string) *backend.FingerprintReleaseParams {
	t.Helper()
	spec := actionSpec(t, engine.ActionRelease)
	return &backend.FingerprintReleaseParams{Fingerprint: fp, Spec: spec,
		Event: backend.EventWrite{Kind: spec.Event, Actor: actor, To: spec.To, Message: "fingerprint released"}}
}
