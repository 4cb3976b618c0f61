package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Periodic jobs (engine.Periodic over backend.ScheduleStore): the rows
// and their compare and set, one job per tick whatever the number of
// engines, pause and run now held in the store, overlap.

func scheduleChecks() []check {
	return []check{
		{name: "RowsCompareAndSet", fn: testScheduleRows},
		{name: "OneJobPerTickAcrossThreeEngines", fn: testScheduleOnePerTick},
		{name: "PauseHoldsInEveryEngine", fn: testSchedulePause},
		{name: "RunNowOnceAcrossEngines", fn: testScheduleRunNow},
		{name: "OverlapSkipWhileLastJobLive", fn: testScheduleOverlap},
		{name: "ControlListsPausesTriggers", fn: testScheduleControl},
		{name: "ThreeChunksTwoEngines", fn: testScheduleChunks, alone: true},
	}
}

// scheduleStore returns s's ScheduleStore, skipping on a store that
// declares none (after checking that the engine refuses its schedules).
func scheduleStore(t *testing.T, s backend.Store) backend.ScheduleStore {
	t.Helper()
	ss, err := backend.ScheduleStoreOf(s)
	if err != nil {
		if !errors.Is(err, engine.ErrUnsupported) {
			t.Fatalf("ScheduleStoreOf: %v, want ErrUnsupported", err)
		}
		t.Skipf("SKIP: the %s store does not declare %s", s.Backend(), backend.CapabilitySchedules)
	}
	return ss
}

func testScheduleRows(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := scheduleStore(t, s)
	ctx := context.Background()
	before := storeNow(t, s)
	if err := ss.ScheduleUpsert(ctx, &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{
		{Name: "b", Spec: "@hourly", Zone: "UTC"}, {Name: "a", Spec: "30 2 * * *", Zone: "Europe/Berlin"},
	}}); err != nil {
		t.Fatal(err)
	}
	rows, err := ss.ScheduleList(ctx, &backend.ScheduleListParams{})
	if err != nil || len(rows) != 2 || rows[0].Name != "a" || rows[1].Name != "b" {
		t.Fatalf("ScheduleList = %v, %v; want a, b", rows, err)
	}
	a := rows[0]
	if a.Spec != "30 2 * * *" || a.Zone != "Europe/Berlin" || a.Paused || !a.TriggerAt.IsZero() || a.LastJob != "" ||
		a.LastTick.Before(before.Add(-time.Second)) || a.SeenAt.IsZero() {
		t.Fatalf("new row %+v", a)
	}
	if page, err := ss.ScheduleList(ctx, &backend.ScheduleListParams{After: "a", Limit: 1}); err != nil || len(page) != 1 || page[0].Name != "b" {
		t.Fatalf("page after a: %v, %v", page, err)
	}
	// A second declaration rewrites spec and zone, keeps the tick.
	if err := ss.ScheduleUpsert(ctx, &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{{Name: "a", Spec: "@daily", Zone: "UTC"}}}); err != nil {
		t.Fatal(err)
	}
	a2, err := ss.ScheduleGet(ctx, &backend.ScheduleGetParams{Name: "a"})
	if err != nil || a2.Spec != "@daily" || a2.Zone != "UTC" || !a2.LastTick.Equal(a.LastTick) || a2.SeenAt.Before(a.SeenAt) {
		t.Fatalf("redeclared %+v, %v", a2, err)
	}
	// Compare and set: forward from the tick held; stale or backwards refused.
	t1, t2 := a.LastTick.Add(time.Hour), a.LastTick.Add(2*time.Hour)
	mark := func(from, to time.Time, job string) bool {
		t.Helper()
		ok, err := ss.ScheduleMarkFired(ctx, &backend.ScheduleMarkFiredParams{Marks: []backend.ScheduleMark{{Name: "a", From: from, To: to, Job: job}}})
		if err != nil || len(ok) != 1 {
			t.Fatalf("ScheduleMarkFired: %v, %v", ok, err)
		}
		return ok[0]
	}
	if !mark(a.LastTick, t1, "sched:a:1") {
		t.Fatal("a mark from the held tick was refused")
	}
	if mark(a.LastTick, t2, "stale") {
		t.Fatal("a mark from a stale tick was applied")
	}
	if mark(t1, a.LastTick, "back") || mark(t1, t1, "same") {
		t.Fatal("a mark backwards was applied")
	}
	if !mark(t1, t2, "") {
		t.Fatal("a mark with no job was refused")
	}
	got, err := ss.ScheduleGet(ctx, &backend.ScheduleGetParams{Name: "a"})
	if err != nil || !got.LastTick.Equal(t2) || got.LastJob != "sched:a:1" || got.FiredAt.IsZero() {
		t.Fatalf("after marks %+v, %v; want tick %v, job sched:a:1 kept", got, err, t2)
	}
	// Pause and resume; run now kept once until cleared by its own value.
	if r, err := ss.SchedulePause(ctx, &backend.SchedulePauseParams{Name: "a"}); err != nil || !r.Paused {
		t.Fatalf("pause: %+v, %v", r, err)
	}
	r1, err := ss.ScheduleTrigger(ctx, &backend.ScheduleTriggerParams{Name: "a"})
	if err != nil || r1.TriggerAt.IsZero() || !r1.Paused {
		t.Fatalf("trigger: %+v, %v", r1, err)
	}
	if r2, err := ss.ScheduleTrigger(ctx, &backend.ScheduleTriggerParams{Name: "a"}); err != nil || !r2.TriggerAt.Equal(r1.TriggerAt) {
		t.Fatalf("second trigger: %+v, %v; want the pending one kept", r2, err)
	}
	clear := func(trig time.Time) {
		t.Helper()
		if _, err := ss.ScheduleMarkFired(ctx, &backend.ScheduleMarkFiredParams{Marks: []backend.ScheduleMark{{Name: "a", Trigger: trig, Job: "sched:a:now:1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	clear(r1.TriggerAt.Add(-time.Millisecond))
	if g, _ := ss.ScheduleGet(ctx, &backend.ScheduleGetParams{Name: "a"}); !g.TriggerAt.Equal(r1.TriggerAt) {
		t.Fatalf("a clear of another request cleared it: %+v", g)
	}
	clear(r1.TriggerAt)
	g, _ := ss.ScheduleGet(ctx, &backend.ScheduleGetParams{Name: "a"})
	if !g.TriggerAt.IsZero() || g.LastJob != "sched:a:now:1" || !g.LastTick.Equal(t2) {
		t.Fatalf("after the clear %+v", g)
	}
	if r, err := ss.ScheduleResume(ctx, &backend.ScheduleResumeParams{Name: "a"}); err != nil || r.Paused {
		t.Fatalf("resume: %+v, %v", r, err)
	}
	for name, call := range map[string]func() error{
		"get":   func() error { _, err := ss.ScheduleGet(ctx, &backend.ScheduleGetParams{Name: "nope"}); return err },
		"pause": func() error { _, err := ss.SchedulePause(ctx, &backend.SchedulePauseParams{Name: "nope"}); return err },
		"resume": func() error {
			_, err := ss.ScheduleResume(ctx, &backend.ScheduleResumeParams{Name: "nope"})
			return err
		},
		"trigger": func() error {
			_, err := ss.ScheduleTrigger(ctx, &backend.ScheduleTriggerParams{Name: "nope"})
			return err
		},
	} {
		if err := call(); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("%s of an unknown schedule: %v, want ErrNotFound", name, err)
		}
	}
	if ok, err := ss.ScheduleMarkFired(ctx, &backend.ScheduleMarkFiredParams{Marks: []backend.ScheduleMark{{Name: "nope", From: t1, To: t2}}}); err != nil || ok[0] {
		t.Errorf("mark of an unknown schedule: %v, %v", ok, err)
	}
}

// schedEngine starts an engine over s (no queues) firing the schedules.
func schedEngine(t *testing.T, s backend.Store, worker string, ps ...engine.Periodic) *engine.Engine {
	t.Helper()
	cfg := fast(worker)
	e := newEngine(t, s, cfg)
	for _, p := range ps {
		if err := e.AddPeriodic(p); err != nil {
			t.Fatal(err)
		}
	}
	return start(t, e)
}

// trySchedule reads a row, nil while no engine has declared it.
func trySchedule(ss backend.ScheduleStore, name string) *backend.ScheduleRow {
	r, err := ss.ScheduleGet(context.Background(), &backend.ScheduleGetParams{Name: name})
	if err != nil {
		return nil
	}
	return r
}

func getSchedule(t *testing.T, ss backend.ScheduleStore, name string) *backend.ScheduleRow {
	t.Helper()
	r, err := ss.ScheduleGet(context.Background(), &backend.ScheduleGetParams{Name: name})
	if err != nil {
		t.Fatalf("ScheduleGet(%s): %v", name, err)
	}
	return r
}

// scheduleJobs lists the ids of every job of a schedule.
func scheduleJobs(t *testing.T, e *engine.Engine, name string) []string {
	t.Helper()
	f, err := engine.ParseQuery(fmt.Sprintf("meta.sluice.schedule:%s", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cursor := ""
	for {
		page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Filter: f, Cursor: cursor, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			out = append(out, j.ID)
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// testScheduleOnePerTick: three engines (two store handles) fire three
// schedules every 200ms; every tick from the schedule's creation to its
// last mark has exactly its one job, and no job is off the grid.
func testScheduleOnePerTick(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := scheduleStore(t, s)
	s2 := s
	if h.Reopen != nil {
		s2 = h.Reopen(t, s)
	}
	const every = 200 * time.Millisecond
	var ps []engine.Periodic
	for _, n := range []string{"tick-a", "tick-b", "tick-c"} {
		ps = append(ps, engine.Periodic{Name: n, Every: every, AllowSubSecond: true, Missed: engine.MissedRunEach, MissedMax: 1000,
			Job: engine.EnqueueParams{Queue: "sched", Kind: "noop", Args: map[string]string{"s": n}}})
	}
	es := []*engine.Engine{schedEngine(t, s, "sched-1", ps...), schedEngine(t, s2, "sched-2", ps...), schedEngine(t, s2, "sched-3", ps...)}
	var created time.Time
	eventually(t, waitLong, func() bool {
		r, err := ss.ScheduleGet(context.Background(), &backend.ScheduleGetParams{Name: "tick-c"})
		if err != nil {
			return false
		}
		created = r.CreatedAt
		return r.LastTick.Sub(r.CreatedAt) >= 15*every
	}, "fifteen ticks of tick-c")
	for _, e := range es {
		stopEngine(t, e)
	}
	for _, p := range ps {
		row := getSchedule(t, ss, p.Name)
		want := map[string]bool{}
		for tk := row.CreatedAt.Truncate(every).Add(every); !tk.After(row.LastTick); tk = tk.Add(every) {
			if tk.After(row.CreatedAt) {
				want[fmt.Sprintf("sched:%s:%d", p.Name, tk.UnixMilli())] = true
			}
		}
		got := scheduleJobs(t, es[0], p.Name)
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] {
				t.Errorf("%s: job %s listed twice", p.Name, id)
			}
			seen[id] = true
			var ms int64
			if _, err := fmt.Sscanf(strings.TrimPrefix(id, "sched:"+p.Name+":"), "%d", &ms); err != nil || ms%every.Milliseconds() != 0 {
				t.Errorf("%s: job %s is off the %s grid", p.Name, id, every)
			}
			if !want[id] && time.UnixMilli(ms).Before(row.LastTick) {
				t.Errorf("%s: job %s before the last tick is not a tick since %v", p.Name, id, created)
			}
		}
		for id := range want {
			if !seen[id] {
				t.Errorf("%s: tick %s lost", p.Name, id)
			}
		}
		if len(want) < 15 {
			t.Errorf("%s: %d ticks", p.Name, len(want))
		}
	}
}

// testSchedulePause: a pause written to the store holds in every engine
// (no job for a tick while paused), and a resume fires again.
func testSchedulePause(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := scheduleStore(t, s)
	p := engine.Periodic{Name: "paused", Every: 100 * time.Millisecond, AllowSubSecond: true,
		Job: engine.EnqueueParams{Queue: "sched", Kind: "noop"}}
	// Declared first, paused before any engine fires it.
	if err := ss.ScheduleUpsert(context.Background(), &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{{Name: "paused", Spec: "@every 100ms", Zone: "UTC"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.SchedulePause(context.Background(), &backend.SchedulePauseParams{Name: "paused"}); err != nil {
		t.Fatal(err)
	}
	t0 := getSchedule(t, ss, "paused").LastTick
	e1 := schedEngine(t, s, "p-1", p)
	schedEngine(t, s, "p-2", p)
	eventually(t, waitLong, func() bool { return getSchedule(t, ss, "paused").LastTick.Sub(t0) >= time.Second },
		"ten ticks passed over while paused")
	if jobs := scheduleJobs(t, e1, "paused"); len(jobs) != 0 {
		t.Fatalf("paused schedule enqueued %v", jobs)
	}
	if _, err := ss.ScheduleResume(context.Background(), &backend.ScheduleResumeParams{Name: "paused"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, func() bool { return len(scheduleJobs(t, e1, "paused")) > 0 }, "a job after resume")
}

// testScheduleRunNow: a run now asked twice before any engine ran it runs
// once, by one of two engines, on a paused schedule too.
func testScheduleRunNow(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := scheduleStore(t, s)
	p := engine.Periodic{Name: "nightly", Cron: "0 3 * * *", Zone: "Europe/Berlin", Job: engine.EnqueueParams{Queue: "sched", Kind: "noop"}}
	if err := ss.ScheduleUpsert(context.Background(), &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{{Name: "nightly", Spec: "0 3 * * *", Zone: "Europe/Berlin"}}}); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error {
			_, err := ss.SchedulePause(context.Background(), &backend.SchedulePauseParams{Name: "nightly"})
			return err
		},
		func() error {
			_, err := ss.ScheduleTrigger(context.Background(), &backend.ScheduleTriggerParams{Name: "nightly"})
			return err
		},
		func() error {
			_, err := ss.ScheduleTrigger(context.Background(), &backend.ScheduleTriggerParams{Name: "nightly"})
			return err
		},
	} {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	e1 := schedEngine(t, s, "n-1", p)
	schedEngine(t, s, "n-2", p)
	eventually(t, waitLong, func() bool { return getSchedule(t, ss, "nightly").TriggerAt.IsZero() }, "the run now taken")
	jobs := scheduleJobs(t, e1, "nightly")
	if len(jobs) != 1 || !strings.HasPrefix(jobs[0], "sched:nightly:now:") {
		t.Fatalf("jobs %v, want one run now", jobs)
	}
	if r := getSchedule(t, ss, "nightly"); r.LastJob != jobs[0] {
		t.Fatalf("last job %q, want %q", r.LastJob, jobs[0])
	}
	j := getJob(t, s, jobs[0])
	if !strings.Contains(string(j.Metadata), `"schedule":"nightly"`) || !strings.Contains(string(j.Metadata), `"run_now":true`) {
		t.Fatalf("metadata %s", j.Metadata)
	}
}

// testScheduleOverlap: under OverlapSkip a tick while the last job waits
// (no engine works its queue) enqueues nothing; OverlapAllow enqueues on.
func testScheduleOverlap(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := scheduleStore(t, s)
	mk := func(name string, o engine.OverlapPolicy) engine.Periodic {
		return engine.Periodic{Name: name, Every: 100 * time.Millisecond, AllowSubSecond: true, Overlap: o,
			Job: engine.EnqueueParams{Queue: "sched", Kind: "noop"}}
	}
	e := schedEngine(t, s, "o-1", mk("skip", engine.OverlapSkip), mk("allow", engine.OverlapAllow))
	// How many ticks a loaded machine's passes fire varies (a late pass
	// fires one for the ticks it missed): the wait is for both a second
	// of skip's ticks after its first job and allow's third job.
	var first time.Time
	eventually(t, waitLong, func() bool {
		r := trySchedule(ss, "skip")
		if r == nil {
			return false
		}
		if r.LastJob != "" && first.IsZero() {
			first = r.LastTick
		}
		return !first.IsZero() && r.LastTick.Sub(first) >= time.Second && len(scheduleJobs(t, e, "allow")) >= 3
	}, "a second of ticks after skip's first job, and three jobs of allow")
	if jobs := scheduleJobs(t, e, "skip"); len(jobs) != 1 {
		t.Fatalf("OverlapSkip enqueued %d jobs while the first waited: %v", len(jobs), jobs)
	}
	// The listing's recent runs: skip's last five ticks, all a second
	// past its one job, were passed over; allow's have jobs waiting.
	page, err := e.Schedules(context.Background(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range page.Schedules {
		waiting := 0
		for _, r := range sc.Recent {
			if r.Job != fmt.Sprintf("sched:%s:%d", sc.Name, r.Tick.UnixMilli()) || r.Tick.After(sc.LastTick) {
				t.Fatalf("%s: recent run %+v is not a tick up to %v with its job's id", sc.Name, r, sc.LastTick)
			}
			if r.State == engine.StateAvailable {
				waiting++
			}
		}
		if len(sc.Recent) != engine.ScheduleRecentRuns || !sc.Recent[len(sc.Recent)-1].Tick.Equal(sc.LastTick) ||
			sc.Name == "skip" && waiting != 0 || sc.Name == "allow" && waiting == 0 {
			t.Fatalf("%s: recent runs %+v (last tick %v)", sc.Name, sc.Recent, sc.LastTick)
		}
	}
}

// testScheduleControl: the operator's Control lists schedules with their
// next fires, pauses, triggers and resumes them, refuses an unknown or
// malformed name, and shows a schedule no process declares as gone.
func testScheduleControl(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := scheduleStore(t, s)
	ctx := context.Background()
	if err := ss.ScheduleUpsert(ctx, &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{{Name: "old", Spec: "@hourly", Zone: "UTC"}}}); err != nil {
		t.Fatal(err)
	}
	cfg := fast("ctl-1")
	cfg.ScheduleSeenInterval = 200 * time.Millisecond
	e := newEngine(t, s, cfg)
	if err := e.AddPeriodic(engine.Periodic{Name: "ctl", Cron: "0 3 * * *", Zone: "Europe/Berlin", Job: engine.EnqueueParams{Queue: "sched", Kind: "noop"}}); err != nil {
		t.Fatal(err)
	}
	start(t, e)
	c := h.control(t, e)
	find := func(name string) *engine.ScheduleInfo {
		t.Helper()
		page, err := c.Schedules(ctx, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		for i := range page.Schedules {
			if page.Schedules[i].Name == name {
				return &page.Schedules[i]
			}
		}
		return nil
	}
	// ctl is read in the same wait as old: on a loaded machine a pass of
	// the declaring loop can come late enough for ctl to look gone for
	// a moment too.
	var got *engine.ScheduleInfo
	eventually(t, waitLong, func() bool {
		o := find("old")
		got = find("ctl")
		return got != nil && !got.Gone && o != nil && o.Gone
	}, "ctl listed, old gone")
	if got.Gone || got.Paused || got.Spec != "0 3 * * *" || got.Zone != "Europe/Berlin" || len(got.Next) != 3 {
		t.Fatalf("ctl listed as %+v", got)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range got.Next {
		if l := n.In(berlin); l.Hour() != 3 || l.Minute() != 0 {
			t.Fatalf("next fire %v is not 03:00 in Berlin", l)
		}
	}
	if page, err := c.Schedules(ctx, 1, "ctl"); err != nil || len(page.Schedules) != 1 || page.Schedules[0].Name != "old" {
		t.Fatalf("page after ctl: %+v, %v", page, err)
	}
	if err := c.PauseSchedule(ctx, "ctl"); err != nil {
		t.Fatal(err)
	}
	if got := find("ctl"); !got.Paused || len(got.Next) != 0 {
		t.Fatalf("paused ctl listed as %+v", got)
	}
	if err := c.TriggerSchedule(ctx, "ctl"); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitLong, func() bool { return len(scheduleJobs(t, e, "ctl")) == 1 }, "the run now enqueued")
	if err := c.ResumeSchedule(ctx, "ctl"); err != nil {
		t.Fatal(err)
	}
	if got := find("ctl"); got.Paused || got.RunNowPending || !strings.HasPrefix(got.LastJob, "sched:ctl:now:") || got.LastState != engine.StateAvailable {
		t.Fatalf("ctl after the run now %+v", got)
	}
	if err := c.PauseSchedule(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("pause of an unknown schedule: %v", err)
	}
	if err := c.TriggerSchedule(ctx, "bad name"); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("trigger of a malformed name: %v", err)
	}
}

// testScheduleChunks: 2,100 schedules (three chunks of a pass), with
// rows of undeclared schedules between them, fired by two engines: every
// schedule moves on, its newest tick has its job, and no undeclared one
// fires. A late pass fires one job for the ticks a schedule missed
// (MissedRunOnce): catching up each one would make a slow pass's
// successor slower still, 2,100 jobs for each second it was late.
func testScheduleChunks(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ss := scheduleStore(t, s)
	ctx := context.Background()
	var gone []backend.ScheduleDef
	for i := 0; i < 2100; i += 150 {
		gone = append(gone, backend.ScheduleDef{Name: fmt.Sprintf("c-%05d-gone", i), Spec: "@hourly", Zone: "UTC"})
	}
	if err := ss.ScheduleUpsert(ctx, &backend.ScheduleUpsertParams{Schedules: gone}); err != nil {
		t.Fatal(err)
	}
	var ps []engine.Periodic
	for i := range 2100 {
		ps = append(ps, engine.Periodic{Name: fmt.Sprintf("c-%05d", i), Every: time.Second, Missed: engine.MissedRunOnce,
			Job: engine.EnqueueParams{Queue: "chunks", Kind: "noop"}})
	}
	es := []*engine.Engine{schedEngine(t, s, "chunk-1", ps...), schedEngine(t, s, "chunk-2", ps...)}
	eventually(t, 3*waitLong, func() bool {
		for _, p := range []string{"c-00000", "c-01050", "c-02099"} {
			r := trySchedule(ss, p)
			if r == nil || r.LastTick.Sub(r.CreatedAt) < 3*time.Second {
				return false
			}
		}
		return true
	}, "three ticks of the first, middle and last schedules")
	for _, e := range es {
		stopEngine(t, e)
	}
	var want []string
	for _, p := range ps {
		r := getSchedule(t, ss, p.Name)
		id := fmt.Sprintf("sched:%s:%d", p.Name, r.LastTick.UnixMilli())
		if !r.LastTick.After(r.CreatedAt) || r.LastJob != id {
			t.Fatalf("%s: last tick %v (created %v), last job %q, want a tick since and its job %s", p.Name, r.LastTick, r.CreatedAt, r.LastJob, id)
		}
		want = append(want, id)
	}
	// The jobs are looked up by id: paging through every job of the
	// queue sorts the whole backlog once a page, minutes under -race.
	found := 0
	for ids := range slices.Chunk(want, engine.MaxListLimit) {
		page, err := es[0].ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{IDs: ids, Queues: []string{"chunks"}}, Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		found += len(page.Jobs)
	}
	if found != len(want) {
		t.Fatalf("%d newest ticks without their job, of %d", len(want)-found, len(want))
	}
	if g := getSchedule(t, ss, "c-00150-gone"); g.LastJob != "" {
		t.Fatalf("an undeclared schedule fired: %+v", g)
	}
}
