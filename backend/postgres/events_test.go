package postgres

import (
	"context"
	"testing"
)

// TestEventsGoWithTheirJob: since migration 0005 a job's events are
// deleted with it by the statement trigger jobs_delete_events, not by a
// foreign key; a DELETE of one job or of many leaves no event behind and
// keeps the events of the jobs it does not delete.
func TestEventsGoWithTheirJob(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "events")
	exec := func(q string, a ...any) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, s.sql(q), a...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO {s}.jobs (id, queue, kind, state, scheduled_at, created_at, state_changed_at)
		SELECT 'j' || g, 'q', 'k', 'completed', g, g, g FROM generate_series(1, 10) g`)
	exec(`INSERT INTO {s}.job_events (job_id, kind, at)
		SELECT 'j' || g, 'failed', e FROM generate_series(1, 10) g, generate_series(1, 3) e`)
	events := func() map[string]int {
		t.Helper()
		rows, err := s.pool.Query(ctx, s.sql(`SELECT job_id, count(*)::int FROM {s}.job_events GROUP BY job_id`))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			out[id] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	exec(`DELETE FROM {s}.jobs WHERE id = $1`, "j1")
	exec(`DELETE FROM {s}.jobs WHERE id = ANY($1::text[])`, []string{"j2", "j3", "j4"})
	got := events()
	if len(got) != 6 {
		t.Fatalf("events of %d jobs left, want the 6 jobs not deleted: %v", len(got), got)
	}
	for _, id := range []string{"j1", "j2", "j3", "j4"} {
		if got[id] != 0 {
			t.Errorf("job %s deleted, %d events left", id, got[id])
		}
	}
	for _, id := range []string{"j5", "j6", "j7", "j8", "j9", "j10"} {
		if got[id] != 3 {
			t.Errorf("job %s kept, %d events, want 3", id, got[id])
		}
	}
	// A DELETE that deletes nothing runs the trigger over no rows.
	exec(`DELETE FROM {s}.jobs WHERE id = 'none'`)
	if n := len(events()); n != 6 {
		t.Fatalf("events of %d jobs after an empty delete, want 6", n)
	}
}
