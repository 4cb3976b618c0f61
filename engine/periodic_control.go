package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The operator's side of periodic jobs (Control): the schedules the store
// keeps, as every process sees them, and their pause, resume and run now,
// which every process reads from the store on its next pass.

// ScheduleInfo is one schedule as an operator sees it.
type ScheduleInfo struct {
	Name string `json:"name"`
	// Spec is the cron expression, descriptor or "@every <d>"; Zone its
	// IANA time zone.
	Spec string `json:"spec"`
	Zone string `json:"zone"`
	// Paused schedules pass over their ticks until resumed.
	Paused bool `json:"paused"`
	// Gone: no process has declared the schedule for three
	// ScheduleSeenIntervals (removed from the code, or every process
	// that declares it is down). It fires no more; its row stays.
	Gone   bool      `json:"gone"`
	SeenAt time.Time `json:"seen_at"`
	// LastTick is the newest tick fired or passed over.
	LastTick time.Time `json:"last_tick"`
	// LastJob is the newest job the schedule enqueued, FiredAt when, and
	// LastState its state now ("" when there is none or it was deleted).
	LastJob   string     `json:"last_job,omitempty"`
	FiredAt   *time.Time `json:"fired_at,omitempty"`
	LastState State      `json:"last_state,omitempty"`
	// RunNowPending: a run now was asked and no process has run it yet.
	RunNowPending bool `json:"run_now_pending"`
	// Next are the next fire times (up to three), none when paused or
	// gone.
	Next []time.Time `json:"next"`
	// Dead counts the schedule's archived jobs, up to DeadMax; the jobs
	// are listed by ScheduleJobsQuery(Name) + " state:archived".
	Dead int64 `json:"dead"`
	// Recent are the schedule's last ticks up to LastTick (at most
	// ScheduleRecentRuns, oldest first), each with its job's state now:
	// "" where a tick has no job (passed over while paused, overlapping
	// or missed, or deleted since).
	Recent []ScheduleRun `json:"recent"`
}

// ScheduleRun is one tick of a schedule and what became of its job.
type ScheduleRun struct {
	Tick  time.Time `json:"tick"`
	Job   string    `json:"job"`
	State State     `json:"state,omitempty"`
}

// Mark is the run's outcome as one character, as the console's
// :schedules and sluice schedules list draw it: ✓ completed, ✗ dead
// (archived, quarantined, undecodable), • under way (waiting, running,
// retrying), - cancelled, · no job (passed over, missed, or deleted).
func (r ScheduleRun) Mark() string {
	switch r.State {
	case StateCompleted:
		return "✓"
	case StateArchived, StateQuarantined, StateUndecodable:
		return "✗"
	case StateCancelled:
		return "-"
	case "":
		return "·"
	default:
		return "•"
	}
}

// ScheduleRecentRuns is how many of its last ticks a listed schedule
// shows.
const ScheduleRecentRuns = 5

// SchedulePage is a page of schedules, in name order.
type SchedulePage struct {
	Schedules []ScheduleInfo `json:"schedules"`
	// Next continues after the page's last schedule; "" at the end.
	Next string `json:"next_cursor,omitempty"`
}

// scheduleDeadMax bounds the count of a schedule's dead jobs.
const scheduleDeadMax = 1000

// ScheduleMetaPath is the metadata path of the schedule a periodic job
// came from. The key "sluice" of a job's metadata is the engine's.
const ScheduleMetaPath = "sluice.schedule"

// ScheduleJobsQuery is the filter (docs/selectors.md) of a schedule's
// jobs: they carry {"sluice": {"schedule": NAME}} in their metadata. A
// viewer, who may filter on no other metadata, may filter on this.
func ScheduleJobsQuery(name string) string {
	return "meta." + ScheduleMetaPath + ":" + strconv.Quote(name)
}

// Schedules pages the schedules the store keeps, after the name after
// (1–200 a page, 50 when limit is 0).
func (e *Engine) Schedules(ctx context.Context, limit int, after string) (*SchedulePage, error) {
	switch {
	case limit == 0:
		limit = 50
	case limit < 1 || limit > 200:
		return nil, fmt.Errorf("%w: limit %d outside 1–200", ErrInvalid, limit)
	}
	ss, err := backend.ScheduleStoreOf(e.store)
	if err != nil {
		return nil, err
	}
	rows, err := ss.ScheduleList(ctx, &backend.ScheduleListParams{After: after, Limit: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	now, err := e.store.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: store clock: %w", err)
	}
	page := &SchedulePage{Schedules: make([]ScheduleInfo, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		page.Next = rows[limit-1].Name
	}
	for _, r := range rows {
		info, err := e.scheduleInfo(ctx, r, now)
		if err != nil {
			return nil, err
		}
		page.Schedules = append(page.Schedules, info)
	}
	return page, nil
}

func (e *Engine) scheduleInfo(ctx context.Context, r *backend.ScheduleRow, now time.Time) (ScheduleInfo, error) {
	info := ScheduleInfo{
		Name: r.Name, Spec: r.Spec, Zone: r.Zone, Paused: r.Paused, SeenAt: r.SeenAt,
		Gone:     now.Sub(r.SeenAt) > 3*e.cfg.ScheduleSeenInterval,
		LastTick: r.LastTick, LastJob: r.LastJob, RunNowPending: !r.TriggerAt.IsZero(),
		Next: []time.Time{},
	}
	if !r.FiredAt.IsZero() {
		at := r.FiredAt
		info.FiredAt = &at
	}
	if !info.Paused && !info.Gone {
		// A spec this build cannot read (written by another) shows no
		// next fires rather than failing the list.
		if next, err := NextTicks(r.Spec, r.Zone, later(r.LastTick, now), 3); err == nil {
			info.Next = next
		}
	}
	var err error
	if r.LastJob != "" {
		j, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: r.LastJob})
		switch {
		case err == nil && j != nil:
			info.LastState = j.State
		case err != nil && !errors.Is(err, ErrNotFound):
			return info, fmt.Errorf("schedule %s: last job %s: %w", r.Name, r.LastJob, err)
		}
	}
	if info.Recent, err = e.scheduleRecent(ctx, r); err != nil {
		return info, err
	}
	f, err := ParseQuery(ScheduleJobsQuery(r.Name) + " state:archived")
	if err != nil {
		return info, err
	}
	n, _, err := e.store.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: storeFilter(f), Max: scheduleDeadMax})
	if err != nil {
		return info, fmt.Errorf("schedule %s: count dead jobs: %w", r.Name, err)
	}
	info.Dead = n
	return info, nil
}

// scheduleRecent is r's last ticks since its creation, up to its
// LastTick, with their jobs' states, read in one lookup by id (a tick's
// job id is derived from it, scheduleJobID).
func (e *Engine) scheduleRecent(ctx context.Context, r *backend.ScheduleRow) ([]ScheduleRun, error) {
	ticks := recentTicks(r.Spec, r.Zone, r.CreatedAt, r.LastTick, ScheduleRecentRuns)
	out := make([]ScheduleRun, len(ticks))
	if len(ticks) == 0 {
		return out, nil
	}
	ids := make([]string, len(ticks))
	for i, tk := range ticks {
		ids[i] = scheduleJobID(r.Name, tk)
		out[i] = ScheduleRun{Tick: tk, Job: ids[i]}
	}
	jobs, err := e.store.JobListPage(ctx, &backend.JobListPageParams{Filter: sluicetype.Filter{IDs: ids}, Limit: len(ids)})
	if err != nil {
		return nil, fmt.Errorf("schedule %s: recent runs: %w", r.Name, err)
	}
	state := make(map[string]State, len(jobs))
	for _, j := range jobs {
		state[j.ID] = j.State
	}
	for i := range out {
		out[i].State = state[out[i].Job]
	}
	return out, nil
}

// recentTicks is the last n ticks of spec in zone after created and up
// to last, oldest first. The ticks are walked forward from a window
// before last that widens until it holds n (a cron expression has no
// step backwards); a spec this build cannot read has none.
func recentTicks(spec, zone string, created, last time.Time, n int) []time.Time {
	if !last.After(created) {
		return nil
	}
	nx, err := NextTicks(spec, zone, last, 1)
	if err != nil || len(nx) == 0 {
		return nil
	}
	gap := nx[0].Sub(last)
	var got []time.Time
	for span := 2 * time.Duration(n+1) * gap; ; span *= 2 {
		start := last.Add(-span)
		if start.Before(created) {
			start = created
		}
		from := start
		got = got[:0]
		for len(got) < 4*n+64 {
			ts, err := NextTicks(spec, zone, from, 32)
			if err != nil || len(ts) == 0 {
				break
			}
			for _, tk := range ts {
				if tk.After(last) {
					break
				}
				got = append(got, tk)
			}
			if ts[len(ts)-1].After(last) || len(ts) < 32 {
				break
			}
			from = ts[len(ts)-1]
		}
		if len(got) >= n || !start.After(created) || span > 64*time.Duration(n+1)*gap {
			break
		}
	}
	if len(got) > n {
		got = got[len(got)-n:]
	}
	return got
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// PauseSchedule makes every process pass over the schedule's ticks until
// ResumeSchedule; ErrNotFound for a schedule the store does not keep.
func (e *Engine) PauseSchedule(ctx context.Context, name string) error {
	return e.scheduleAction(ctx, "pause_schedule", name, func(ctx context.Context, ss backend.ScheduleStore) error {
		_, err := ss.SchedulePause(auditCtx(ctx), &backend.SchedulePauseParams{Name: name})
		return err
	})
}

// ResumeSchedule lets the schedule fire again from its next tick.
func (e *Engine) ResumeSchedule(ctx context.Context, name string) error {
	return e.scheduleAction(ctx, "resume_schedule", name, func(ctx context.Context, ss backend.ScheduleStore) error {
		_, err := ss.ScheduleResume(auditCtx(ctx), &backend.ScheduleResumeParams{Name: name})
		return err
	})
}

// TriggerSchedule asks for one run now, paused or not: the next pass of
// any process declaring the schedule enqueues it, once
// ("sched:<name>:now:<ms>"). A second ask before it ran is the same run.
func (e *Engine) TriggerSchedule(ctx context.Context, name string) error {
	return e.scheduleAction(ctx, "trigger_schedule", name, func(ctx context.Context, ss backend.ScheduleStore) error {
		_, err := ss.ScheduleTrigger(auditCtx(ctx), &backend.ScheduleTriggerParams{Name: name})
		return err
	})
}

// scheduleAction runs action (an ActionInfo name) on the schedule name,
// inside the Interceptor and the audit trail.
func (e *Engine) scheduleAction(ctx context.Context, action, name string, fn func(context.Context, backend.ScheduleStore) error) error {
	_, err := intercepted(ctx, e, ActionInfo{Name: action, Schedule: name}, func(ctx context.Context) (struct{}, error) {
		if _, ok, err := replayed[struct{}](ctx); ok {
			return struct{}{}, err
		}
		if err := sluicetype.ValidateName("schedule", name); err != nil {
			return struct{}{}, err
		}
		ss, err := backend.ScheduleStoreOf(e.store)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, fn(ctx, ss)
	})
	return err
}
