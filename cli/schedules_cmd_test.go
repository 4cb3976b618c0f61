package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// TestSchedulesCommands: schedules list shows a schedule's expression,
// zone, last job and its state; pause, trigger and resume are written to
// the store and listed; an unknown schedule is refused by name.
func TestSchedulesCommands(t *testing.T) {
	path := deadStore(t, 1, 0)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := backend.ScheduleStoreOf(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ss.ScheduleUpsert(ctx, &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{
		{Name: "nightly", Spec: "30 2 * * *", Zone: "Europe/Berlin"}, {Name: "hourly", Spec: "@hourly", Zone: "UTC"},
	}}); err != nil {
		t.Fatal(err)
	}
	row, err := ss.ScheduleGet(ctx, &backend.ScheduleGetParams{Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ScheduleMarkFired(ctx, &backend.ScheduleMarkFiredParams{Marks: []backend.ScheduleMark{
		{Name: "nightly", From: row.LastTick, To: row.LastTick.Add(time.Second), Job: "B-00"},
	}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	store := "sqlite://" + path

	code, out, stderr := runCLI(t, "", "schedules", "list", "--store", store)
	if code != 0 || !strings.HasPrefix(out, "SCHEDULE") {
		t.Fatalf("schedules list: exit %d %s %s", code, out, stderr)
	}
	// No tick has passed since the schedules were made: no recent runs.
	if lines := strings.Split(strings.TrimSpace(out), "\n"); !strings.HasSuffix(lines[0], "DEAD  RECENT") || !strings.HasSuffix(lines[1], " none") {
		t.Errorf("schedules list lacks the RECENT column:\n%s", out)
	}
	for _, want := range []string{"nightly", "30 2 * * *", "Europe/Berlin", "B-00", "archived", "hourly", "@hourly"} {
		if !strings.Contains(out, want) {
			t.Errorf("schedules list lacks %q:\n%s", want, out)
		}
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "nightly"}, "schedule nightly: paused"},
		{[]string{"trigger", "hourly"}, "schedule hourly: run now asked"},
	} {
		code, out, stderr := runCLI(t, "", append(append([]string{"schedules"}, step.args...), "--store", store)...)
		if code != 0 || !strings.Contains(out, step.want) {
			t.Fatalf("schedules %v: exit %d %s %s", step.args, code, out, stderr)
		}
	}
	var list []engine.ScheduleInfo
	if code, out, _ = runCLI(t, "", "schedules", "list", "--store", store, "-o", "json"); code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 {
		t.Fatalf("schedules list -o json: %s", out)
	}
	if list[0].Name != "hourly" || !list[0].RunNowPending || list[1].Name != "nightly" || !list[1].Paused || list[1].LastState != engine.StateArchived || len(list[1].Next) != 0 || len(list[0].Next) != 3 {
		t.Fatalf("schedules after pause and trigger: %+v", list)
	}
	if code, out, stderr = runCLI(t, "", "schedules", "resume", "nightly", "--store", store); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("schedules resume: exit %d %s %s", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, "", "schedules", "pause", "nope", "--store", store); code != 1 || !strings.Contains(stderr, "schedule nope") || !strings.Contains(stderr, "not found") {
		t.Fatalf("schedules pause of an unknown one: exit %d %s", code, stderr)
	}
}

// TestScheduleRowRecent: the list's RECENT cell marks each of a
// schedule's last ticks, oldest first, as the console's :schedules does.
func TestScheduleRowRecent(t *testing.T) {
	run := func(st engine.State) engine.ScheduleRun { return engine.ScheduleRun{Job: "j", State: st} }
	for _, tc := range []struct {
		name   string
		recent []engine.ScheduleRun
		want   string
	}{
		{"no tick yet", nil, "none"},
		{"every mark", []engine.ScheduleRun{run(engine.StateCompleted), run(engine.StateArchived), run(engine.StateRunning),
			run(engine.StateCancelled), run("")}, "✓✗•-·"},
		{"dead kinds and waiting ones", []engine.ScheduleRun{run(engine.StateQuarantined), run(engine.StateUndecodable),
			run(engine.StateScheduled), run(engine.StateAvailable), run(engine.StateRetryable)}, "✗✗•••"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := scheduleRow(engine.ScheduleInfo{Name: "n", Spec: "@hourly", Zone: "UTC", Recent: tc.recent})
			if got := row[len(row)-1]; got != tc.want {
				t.Errorf("RECENT %q, want %q", got, tc.want)
			}
		})
	}
}
