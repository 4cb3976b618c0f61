package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// Periodic jobs: a store declaring CapabilitySchedules keeps one row per
// schedule a program declares (engine.Periodic). The row is what every
// process of the program shares: the newest tick fired (the fence that
// moves forward only), the pause, a pending "run now", and when a process
// last declared it. Exactly one job per tick comes from the job's id,
// derived from schedule and tick by the engine, through the idempotent
// JobInsertMany; the row only says how far the schedule has gone.

// ScheduleRow is one stored schedule.
type ScheduleRow struct {
	Name string
	// Spec is the expression ("30 2 * * *", "@hourly", "@every 90s") and
	// Zone its IANA time zone, as the last process that declared it wrote
	// them: what the console shows and computes next fires from.
	Spec, Zone string
	// LastTick is the newest tick fired or passed over; ticks after it
	// are due. Set to the store's clock when the row is made, so a new
	// schedule starts at its next tick.
	LastTick time.Time
	// LastJob is the id of the newest job the schedule enqueued; "" when
	// none.
	LastJob string
	// FiredAt is when LastJob was enqueued (store clock).
	FiredAt time.Time
	Paused  bool
	// TriggerAt is when an operator asked for a run now that no process
	// has run yet; zero when none is pending.
	TriggerAt time.Time
	// SeenAt is when a process last declared the schedule.
	SeenAt    time.Time
	CreatedAt time.Time
}

// ScheduleDef is a schedule as a process declares it.
type ScheduleDef struct {
	Name, Spec, Zone string
}

// ScheduleUpsertParams declares schedules: a new one gets a row whose
// LastTick is the store's clock; an existing one gets Spec and Zone
// rewritten; both get SeenAt set to the store's clock. Pause, trigger and
// ticks are left as they are.
type ScheduleUpsertParams struct {
	Schedules []ScheduleDef
}

// ScheduleListParams pages schedules by name.
type ScheduleListParams struct {
	// After continues past this name; "" starts at the first.
	After string
	Limit int // 1000 when 0
}

type ScheduleGetParams struct{ Name string }

// SchedulePauseParams pauses (or, for ScheduleResume, resumes) one
// schedule.
type SchedulePauseParams struct{ Name string }

type ScheduleResumeParams struct{ Name string }

// ScheduleTriggerParams asks for one run now of a schedule: the row's
// TriggerAt is set to the store's clock, unless a request is already
// pending (which it keeps: two presses before any process ran one run
// once).
type ScheduleTriggerParams struct{ Name string }

// ScheduleMark moves one schedule forward after its ticks were fired or
// passed over.
type ScheduleMark struct {
	Name string
	// From is the LastTick the process read; the mark applies only while
	// the row still holds it and To is after it, so a process that read
	// the row before another moved it cannot move it back.
	From, To time.Time
	// Job is the id of the newest job enqueued for the ticks up to To
	// (or for the run now); "" keeps LastJob as it was.
	Job string
	// Trigger, when not zero, is the TriggerAt the process ran: the
	// pending request is cleared if it is still that one.
	Trigger time.Time
}

// ScheduleMarkFiredParams applies marks, each on its own.
type ScheduleMarkFiredParams struct {
	Marks []ScheduleMark
}

// ScheduleStore is what a store declaring CapabilitySchedules offers
// (backend/backendtest's Schedules checks hold every store to it).
type ScheduleStore interface {
	// ScheduleUpsert declares schedules (see ScheduleUpsertParams).
	ScheduleUpsert(ctx context.Context, p *ScheduleUpsertParams) error
	// ScheduleList pages schedules in name order.
	ScheduleList(ctx context.Context, p *ScheduleListParams) ([]*ScheduleRow, error)
	// ScheduleGet returns one schedule; ErrNotFound when there is none.
	ScheduleGet(ctx context.Context, p *ScheduleGetParams) (*ScheduleRow, error)
	// SchedulePause and ScheduleResume set the pause and return the row;
	// ErrNotFound when there is none.
	SchedulePause(ctx context.Context, p *SchedulePauseParams) (*ScheduleRow, error)
	ScheduleResume(ctx context.Context, p *ScheduleResumeParams) (*ScheduleRow, error)
	// ScheduleTrigger records a run-now request and returns the row;
	// ErrNotFound when there is none.
	ScheduleTrigger(ctx context.Context, p *ScheduleTriggerParams) (*ScheduleRow, error)
	// ScheduleMarkFired applies each mark whose From the row still holds
	// (compare and set, in one transaction or script per mark at least)
	// and reports, per mark, whether its tick moved. A trigger is cleared
	// when the row still holds it, whether or not the tick moved.
	ScheduleMarkFired(ctx context.Context, p *ScheduleMarkFiredParams) ([]bool, error)
}

// ScheduleStoreOf returns s's schedules, or an error matching
// ErrUnsupported when s keeps none.
func ScheduleStoreOf(s Store) (ScheduleStore, error) {
	a, ok := s.(ScheduleStore)
	if !ok || !Declares(s, CapabilitySchedules) {
		return nil, fmt.Errorf("%w: this store (%s) keeps no schedules", sluicetype.ErrUnsupported, s.Backend())
	}
	return a, nil
}

// ScheduleListLimit is the page size of ScheduleList when Limit is 0, and
// its most.
const ScheduleListLimit = 1000
