package tui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/engine"
)

// schedFixture adds to the console's fixture three schedules, as
// processes declaring them write them: nightly fired a job that died,
// weekly is paused, reports has a run now pending.
func schedFixture(t *testing.T) (*fixture, backend.ScheduleStore) {
	t.Helper()
	f := setup(t, false)
	ctx := context.Background()
	const dead = "sched:nightly:1767227400000"
	res, err := f.eng.EnqueueMany(ctx, []engine.EnqueueParams{{ID: dead, Queue: "billing", Kind: "invoice.generate", MaxAttempts: 1,
		Metadata: json.RawMessage(`{"sluice":{"schedule":"nightly","tick":"2026-01-01T00:30:00Z"}}`)}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("enqueue: %v %v", err, res)
	}
	job := f.claim(t, ctx, "billing", dead)
	if _, err := f.store.JobFinish(ctx, backendtest.Outcome{
		JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
		Charge: backend.ChargeAttempt, Event: engine.EventArchived, Actor: testWorker, Message: errRefused,
		Error:        &engine.AttemptError{Message: errRefused, Worker: testWorker},
		ErrorPattern: engine.NormalizeError(errRefused),
		To:           engine.StateArchived, Reason: engine.ReasonAttemptsExhausted,
	}.Plan(job)); err != nil {
		t.Fatal(err)
	}
	ss, err := backend.ScheduleStoreOf(f.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.ScheduleUpsert(ctx, &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{
		{Name: "nightly", Spec: "30 2 * * *", Zone: "Europe/Berlin"},
		{Name: "reports", Spec: "@daily", Zone: "UTC"},
		{Name: "weekly", Spec: "0 9 * * 1", Zone: "America/New_York"},
	}}); err != nil {
		t.Fatal(err)
	}
	row, err := ss.ScheduleGet(ctx, &backend.ScheduleGetParams{Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ScheduleMarkFired(ctx, &backend.ScheduleMarkFiredParams{Marks: []backend.ScheduleMark{
		{Name: "nightly", From: row.LastTick, To: row.LastTick.Add(time.Millisecond), Job: dead},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.SchedulePause(ctx, &backend.SchedulePauseParams{Name: "weekly"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ScheduleTrigger(ctx, &backend.ScheduleTriggerParams{Name: "reports"}); err != nil {
		t.Fatal(err)
	}
	return f, ss
}

// TestSchedulesScreen: :schedules lists each schedule's expression and
// zone, status, next fire, last fire and its outcome, and dead jobs;
// pause and run now ask first and are written to the store; enter lists
// the schedule's dead jobs.
func TestSchedulesScreen(t *testing.T) {
	f, ss := schedFixture(t)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("schedules")
	s.keys("<enter>")
	s.golden(s.waitFor("nightly", "30 2 * * *", "Europe/Berlin", "02:30", "paused", "run now", "arch"))

	s.keys("P")
	s.waitFor("Pause schedule nightly?")
	s.keys("y")
	s.waitFor("schedule nightly paused")
	if r, err := ss.ScheduleGet(context.Background(), &backend.ScheduleGetParams{Name: "nightly"}); err != nil || !r.Paused {
		t.Fatalf("nightly after P y: %+v %v", r, err)
	}
	s.keys("T")
	s.waitFor("Run schedule nightly now?")
	s.keys("y")
	s.waitFor("schedule nightly will run now")
	if r, err := ss.ScheduleGet(context.Background(), &backend.ScheduleGetParams{Name: "nightly"}); err != nil || r.TriggerAt.IsZero() {
		t.Fatalf("nightly after T y: %+v %v", r, err)
	}
	s.keys("<enter>")
	s.waitFor("meta.sluice.schedule")
	screen := s.waitFor("sched:nightly:1767227400000")
	if strings.Contains(screen, "inv-0001") {
		t.Fatalf("the schedule's dead jobs list another job:\n%s", screen)
	}
}

// TestSchedulesScreenReadOnly: a read-only console shows the schedules
// but offers neither pause nor run now, and the keys do nothing.
func TestSchedulesScreenReadOnly(t *testing.T) {
	f, ss := schedFixture(t)
	opts := testOptions()
	opts.ReadOnly = true
	s := start(t, f.eng, opts)
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("schedules")
	s.keys("<enter>")
	screen := s.waitFor("nightly", "Europe/Berlin", "dead jobs")
	if strings.Contains(screen, "pause/resume") || strings.Contains(screen, "run now ·") || strings.Contains(screen, "T run") {
		t.Fatalf("a read-only console offers schedule actions:\n%s", screen)
	}
	s.keys("P", "T", "y")
	s.keys("<enter>")
	s.waitFor("meta.sluice.schedule")
	if r, err := ss.ScheduleGet(context.Background(), &backend.ScheduleGetParams{Name: "nightly"}); err != nil || r.Paused || !r.TriggerAt.IsZero() {
		t.Fatalf("a read-only console changed nightly: %+v %v", r, err)
	}
}

// TestRecentRuns: a schedule's last ticks draw as one mark each, oldest
// first.
func TestRecentRuns(t *testing.T) {
	for _, c := range []struct {
		states []engine.State
		want   string
	}{
		{nil, ""},
		{[]engine.State{engine.StateCompleted, engine.StateArchived, "", engine.StateRunning, engine.StateCancelled}, "✓✗·•-"},
		{[]engine.State{engine.StateQuarantined, engine.StateUndecodable, engine.StateRetryable, engine.StateAvailable, engine.StateScheduled}, "✗✗•••"},
	} {
		var rs []engine.ScheduleRun
		for _, st := range c.states {
			rs = append(rs, engine.ScheduleRun{State: st})
		}
		if got := recentRuns(rs); got != c.want {
			t.Errorf("recentRuns(%v) = %q, want %q", c.states, got, c.want)
		}
	}
}
