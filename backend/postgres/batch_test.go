package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestUnlockedBatchTestsEachRowAgain: an unlocked batch (one state) picks
// its jobs without locking them, so a job may leave the selection between
// the pick and the change. Its UPDATE tests the selection again on each
// row: a job that is no longer archived, and one that died again after
// the cutoff, are left as they are, get no event, and move no counter.
func TestUnlockedBatchTestsEachRowAgain(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "unlocked")
	// j1–j3 archived before the cutoff (10); j4 retried meanwhile
	// (available); j5 archived again after the cutoff.
	if _, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {s}.jobs (id, queue, kind, payload, state, scheduled_at,
		created_at, state_changed_at, finalized_at, attempt, version)
	VALUES ('j1', 'q', 'k', '{}', 'archived', 1, 1, 1, 1, 1, 3), ('j2', 'q', 'k', '{}', 'archived', 1, 1, 2, 2, 1, 3),
		('j3', 'r', 'k', '{}', 'archived', 1, 1, 3, 3, 2, 3), ('j4', 'q', 'k', '{}', 'available', 1, 1, 4, NULL, 1, 4),
		('j5', 'q', 'k', '{}', 'archived', 1, 1, 20, 20, 1, 5)`)); err != nil {
		t.Fatal(err)
	}
	if err := s.JobCountReconcile(ctx); err != nil {
		t.Fatal(err)
	}
	spec, err := backend.SpecFor(sluicetype.ActionRetry)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := spec.Narrow(sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}})
	var b *batch
	if err := s.writeTx(ctx, func(tx *wtx) error {
		b = &batch{s: s, tx: tx, limit: 10, unlocked: true, p: &backend.OperationProcessBatchParams{
			Spec: spec, Selector: sel, Cutoff: time.Unix(0, 10),
			Event: backend.EventWrite{Kind: spec.Event, Actor: "op", To: spec.To, Message: "bulk retry"}}}
		// As the pick saw them: all five archived.
		var picked []candidate
		for _, id := range []string{"j1", "j2", "j3", "j4", "j5"} {
			q := "q"
			if id == "j3" {
				q = "r"
			}
			picked = append(picked, candidate{id: id, queue: q, state: "archived"})
		}
		return b.apply(ctx, picked, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if b.succeeded != 3 {
		t.Errorf("succeeded %d, want 3", b.succeeded)
	}
	want := map[string]struct {
		state   string
		version int64
		events  int
	}{"j1": {"available", 4, 1}, "j2": {"available", 4, 1}, "j3": {"available", 4, 1}, "j4": {"available", 4, 0}, "j5": {"archived", 5, 0}}
	for id, w := range want {
		var state, from string
		var version, events int64
		if err := s.pool.QueryRow(ctx, s.sql(`SELECT state, version,
			(SELECT count(*) FROM {s}.job_events e WHERE e.job_id = j.id),
			coalesce((SELECT string_agg(from_state || '>' || to_state || '@' || attempt, ',') FROM {s}.job_events e WHERE e.job_id = j.id), '')
			FROM {s}.jobs j WHERE id = $1`), id).Scan(&state, &version, &events, &from); err != nil {
			t.Fatal(err)
		}
		if state != w.state || version != w.version || events != int64(w.events) {
			t.Errorf("%s: %s v%d with %d events, want %s v%d with %d", id, state, version, events, w.state, w.version, w.events)
		}
		if w.events == 1 && from != "archived>available@1" && from != "archived>available@2" {
			t.Errorf("%s: event %q, want archived>available at the job's attempt", id, from)
		}
	}
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	if q, r := counts["q"], counts["r"]; q[sluicetype.StateAvailable] != 3 || q[sluicetype.StateArchived] != 1 ||
		r[sluicetype.StateAvailable] != 1 || r[sluicetype.StateArchived] != 0 {
		t.Errorf("counters %v, want q: 3 available (j1, j2, j4), 1 archived (j5); r: 1 available", counts)
	}
}
