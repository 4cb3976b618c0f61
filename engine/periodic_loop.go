package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
)

// The scheduler: every process that declares schedules runs this loop;
// none leads. Each pass reads the schedules' rows, fires the ticks due
// since each row's LastTick under the schedule's policies, and moves the
// rows forward with a compare and set. Two processes firing one tick
// enqueue the same job id, so the store keeps one job; the slower gets it
// back as existing. A process killed between its enqueue and its mark
// leaves the tick to the next process, whose enqueue finds the job.

// maxDueScan bounds how many missed cron ticks one pass walks; older ones
// are passed over.
const maxDueScan = 100_000

// periodicPoll is the most a pass waits for the next tick: how soon a
// pause, a resume or a run now made elsewhere is seen.
const periodicPoll = time.Second

// scheduleEnqueueBatch is the most jobs one pass enqueues per store call.
const scheduleEnqueueBatch = 1000

func (e *Engine) periodicDefs() []*periodicDef {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*periodicDef, 0, len(e.periodic))
	for _, d := range e.periodic {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *periodicDef) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// periodicLoop runs the scheduler until Stop.
func (e *Engine) periodicLoop() {
	ctx := e.runCtx
	ss, err := backend.ScheduleStoreOf(e.store)
	if err != nil {
		e.log.Error("schedules not run", "err", err)
		return
	}
	defs := e.periodicDefs()
	var seen time.Time
	for {
		if time.Since(seen) >= e.cfg.ScheduleSeenInterval {
			if err := e.declareSchedules(ctx, ss, defs); err != nil {
				if ctx.Err() != nil {
					return
				}
				if !sleepCtx(ctx, e.outPeriodic.Fail(err)) {
					return
				}
				continue
			}
			seen = time.Now()
		}
		wait, err := e.periodicPass(ctx, ss, defs)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = e.outPeriodic.Fail(err)
		} else {
			e.outPeriodic.Succeed()
		}
		// The next declaration is due in time, whatever the ticks.
		wait = min(wait, max(time.Until(seen.Add(e.cfg.ScheduleSeenInterval)), time.Millisecond))
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// declareSchedules writes every declared schedule's row and SeenAt.
func (e *Engine) declareSchedules(ctx context.Context, ss backend.ScheduleStore, defs []*periodicDef) error {
	for chunk := range slices.Chunk(defs, backend.ScheduleListLimit) {
		p := &backend.ScheduleUpsertParams{Schedules: make([]backend.ScheduleDef, len(chunk))}
		for i, d := range chunk {
			p.Schedules[i] = backend.ScheduleDef{Name: d.Name, Spec: d.spec, Zone: d.zone}
		}
		if err := ss.ScheduleUpsert(ctx, p); err != nil {
			return fmt.Errorf("declare schedules: %w", err)
		}
	}
	return nil
}

// firing is one job a pass enqueues, and the schedule it moves.
type firing struct {
	def  *periodicDef
	id   string
	tick time.Time
	now  bool // a run now
}

// periodicChunk is how many schedules a pass reads, fires and marks at
// a time.
const periodicChunk = backend.ScheduleListLimit

// periodicPass fires what is due and says how long to wait for the next
// tick. It goes through the schedules a chunk at a time, starting at a
// chunk of its own drawing: each chunk's rows are read just before its
// enqueue, so processes that woke together mostly find the chunks the
// others did already marked, and enqueue each tick once rather than once
// per process.
func (e *Engine) periodicPass(ctx context.Context, ss backend.ScheduleStore, defs []*periodicDef) (time.Duration, error) {
	chunks := slices.Collect(slices.Chunk(defs, periodicChunk))
	if len(chunks) == 0 {
		return periodicPoll, nil
	}
	first := rand.IntN(len(chunks))
	var soonest, now time.Time
	for k := range chunks {
		i := (first + k) % len(chunks)
		after := ""
		if i > 0 {
			after = chunks[i-1][len(chunks[i-1])-1].Name
		}
		var err error
		var next time.Time
		if now, next, err = e.periodicChunk(ctx, ss, chunks[i], after); err != nil {
			return 0, err
		}
		if soonest.IsZero() || next.Before(soonest) {
			soonest = next
		}
	}
	// Processes woken by the same tick would all enqueue it; a few
	// milliseconds of spread let the first one's marks reach the others.
	wait := soonest.Sub(now) + time.Duration(rand.Int64N(int64(20*time.Millisecond)))
	return max(wait, time.Millisecond), nil
}

// periodicChunk fires what is due among defs (consecutive in name
// order, the first after the name after) and returns the store's clock
// and the soonest next tick.
func (e *Engine) periodicChunk(ctx context.Context, ss backend.ScheduleStore, defs []*periodicDef, after string) (time.Time, time.Time, error) {
	byName := make(map[string]*backend.ScheduleRow, len(defs))
	last := defs[len(defs)-1].Name
	for {
		// Rows of schedules no longer declared (gone) may lie between
		// these: read on until the chunk's last name.
		page, err := ss.ScheduleList(ctx, &backend.ScheduleListParams{After: after, Limit: periodicChunk})
		if err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("list schedules: %w", err)
		}
		for _, r := range page {
			byName[r.Name] = r
		}
		if len(page) < periodicChunk || page[len(page)-1].Name >= last {
			break
		}
		after = page[len(page)-1].Name
	}
	now, err := e.store.Now(ctx)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("schedules: store clock: %w", err)
	}
	e.clock.observe(now)
	var fires []firing
	marks := map[string]*backend.ScheduleMark{}
	soonest := now.Add(periodicPoll)
	for _, d := range defs {
		row := byName[d.Name]
		if row == nil {
			continue // declared at the next declare
		}
		latest, ticks := dueTicks(d, row.LastTick, now)
		if !latest.IsZero() {
			mk := &backend.ScheduleMark{Name: d.Name, From: row.LastTick, To: latest}
			marks[d.Name] = mk
			if !row.Paused {
				if d.Overlap == OverlapSkip && len(ticks) > 1 {
					ticks = ticks[len(ticks)-1:]
				}
				if d.Overlap == OverlapSkip && e.scheduleBusy(ctx, row.LastJob) {
					ticks = nil
				}
				for _, t := range ticks {
					fires = append(fires, firing{def: d, id: scheduleJobID(d.Name, t), tick: t})
				}
			}
		}
		if !row.TriggerAt.IsZero() {
			mk := marks[d.Name]
			if mk == nil {
				mk = &backend.ScheduleMark{Name: d.Name}
				marks[d.Name] = mk
			}
			mk.Trigger = row.TriggerAt
			fires = append(fires, firing{def: d, id: scheduleNowID(d.Name, row.TriggerAt), tick: row.TriggerAt, now: true})
		}
		from := row.LastTick
		if !latest.IsZero() {
			from = latest
		}
		if n := d.tick.next(from); !n.IsZero() && n.Before(soonest) {
			soonest = n
		}
	}
	if err := e.fireSchedules(ctx, fires, marks); err != nil {
		return time.Time{}, time.Time{}, err
	}
	if len(marks) > 0 {
		p := &backend.ScheduleMarkFiredParams{Marks: make([]backend.ScheduleMark, 0, len(marks))}
		for _, mk := range marks {
			p.Marks = append(p.Marks, *mk)
		}
		// One order in every process: a store that locks rows as it
		// marks them makes two passes wait for each other, not deadlock.
		slices.SortFunc(p.Marks, func(a, b backend.ScheduleMark) int { return strings.Compare(a.Name, b.Name) })
		if _, err := ss.ScheduleMarkFired(ctx, p); err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("mark schedules fired: %w", err)
		}
	}
	return now, soonest, nil
}

// dueTicks returns the newest tick after last and at or before now (zero
// when none), and the ticks to fire under d's missed policy, oldest
// first.
func dueTicks(d *periodicDef, last, now time.Time) (time.Time, []time.Time) {
	var due []time.Time
	if ev, ok := d.tick.(everyTicker); ok {
		// Intervals are counted, not walked.
		latest := ev.next(now)
		if latest.After(now) {
			latest = latest.Add(-ev.d)
		}
		if !latest.After(last) {
			return time.Time{}, nil
		}
		n := int(min(int64((latest.Sub(last)+ev.d-1)/ev.d), int64(d.MissedMax)))
		for i := n - 1; i >= 0; i-- {
			due = append(due, latest.Add(-time.Duration(i)*ev.d))
		}
	} else {
		for t, i := d.tick.next(last), 0; !t.IsZero() && !t.After(now) && i < maxDueScan; t, i = d.tick.next(t), i+1 {
			due = append(due, t)
			if len(due) > d.MissedMax {
				due = due[1:]
			}
		}
		if len(due) == 0 {
			return time.Time{}, nil
		}
	}
	latest := due[len(due)-1]
	switch d.Missed {
	case MissedRunEach:
		return latest, due
	case MissedRunOnce:
		return latest, due[len(due)-1:]
	default:
		if now.Sub(latest) <= d.Grace {
			return latest, due[len(due)-1:]
		}
		return latest, nil
	}
}

// scheduleBusy reports whether a schedule's previous job is still under
// way. A job that cannot be read (deleted, store error) is taken as done:
// a tick passed over for an error would be lost.
func (e *Engine) scheduleBusy(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	j, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
	if err != nil || j == nil {
		return false
	}
	switch j.State {
	case StateAvailable, StateScheduled, StateRunning, StateRetryable:
		return true
	}
	return false
}

// fireSchedules enqueues the pass's jobs and writes each schedule's
// newest job into its mark. A job refused for its content is logged and
// its tick passed over; a failing store fails the pass, marking nothing.
func (e *Engine) fireSchedules(ctx context.Context, fires []firing, marks map[string]*backend.ScheduleMark) error {
	for chunk := range slices.Chunk(fires, scheduleEnqueueBatch) {
		ps := make([]EnqueueParams, len(chunk))
		for i, f := range chunk {
			ps[i] = f.def.jobFor(f.tick, f.id, f.now)
		}
		res, err := e.EnqueueMany(ctx, ps)
		if err != nil {
			return fmt.Errorf("enqueue scheduled jobs: %w", err)
		}
		for i, r := range res {
			f := chunk[i]
			switch {
			case r.Err == nil:
				if !r.Existing {
					e.log.Debug("scheduled job enqueued", "schedule", f.def.Name, "tick", f.tick, "job", f.id)
				}
			case errors.Is(r.Err, ErrConflict):
				// Another process enqueued this tick with other content.
			default:
				e.log.Error("scheduled job refused", "schedule", f.def.Name, "tick", f.tick, "err", r.Err)
				continue
			}
			if mk := marks[f.def.Name]; mk != nil {
				mk.Job = f.id
			}
		}
	}
	return nil
}

// jobFor builds the job of one tick: the declared job with its id and
// the schedule's metadata.
func (d *periodicDef) jobFor(tick time.Time, id string, now bool) EnqueueParams {
	p := d.Job
	if d.JobFunc != nil {
		p = d.JobFunc(tick)
	}
	p.ID = id
	meta := map[string]json.RawMessage{}
	if len(p.Metadata) > 0 {
		_ = json.Unmarshal(p.Metadata, &meta) // not an object: the enqueue refuses it
	}
	mine := map[string]any{"schedule": d.Name, "tick": tick.UTC().Format(time.RFC3339Nano)}
	if now {
		mine["run_now"] = true
	}
	b, _ := json.Marshal(mine)
	meta["sluice"] = b
	p.Metadata, _ = json.Marshal(meta)
	return p
}
