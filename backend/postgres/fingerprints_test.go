package postgres

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	"github.com/sluicehq/sluice/backend"
)

// TestFingerprintTableFollowsJobs: since migration 0008 a job's
// fingerprint is indexed in job_fingerprints, kept by triggers on jobs. An
// insert (through the store, and by hand), a fingerprint changed (an
// edited payload), a claim and a completion (which must leave it as it
// is), and deletions of one job and of many leave exactly one row per job
// with a fingerprint, holding its hash.
func TestFingerprintTableFollowsJobs(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "fptable")
	exec := func(q string, a ...any) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, s.sql(q), a...); err != nil {
			t.Fatal(err)
		}
	}
	// rows reads job_fingerprints as job id -> whether its hash is the
	// hash of that job's fingerprint column.
	rows := func() map[string]bool {
		t.Helper()
		r, err := s.pool.Query(ctx, s.sql(`SELECT f.job_id, coalesce(f.fp = hashtextextended(j.fingerprint, 0), false)
			FROM {s}.job_fingerprints f LEFT JOIN {s}.jobs j ON j.id = f.job_id`))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for r.Next() {
			var id string
			var ok bool
			if err := r.Scan(&id, &ok); err != nil {
				t.Fatal(err)
			}
			if _, dup := out[id]; dup {
				t.Fatalf("job %s has two rows in job_fingerprints", id)
			}
			out[id] = ok
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := func(step string, ids ...string) {
		t.Helper()
		w := map[string]bool{}
		for _, id := range ids {
			w[id] = true
		}
		if got := rows(); !maps.Equal(got, w) {
			t.Fatalf("%s: job_fingerprints %v, want %v (true: the hash of the job's fingerprint)", step, got, w)
		}
	}
	var ps []*backend.JobInsertParams
	for _, id := range []string{"a", "b", "c"} {
		ps = append(ps, &backend.JobInsertParams{ID: id, Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`),
			SchemaVersion: 1, MaxAttempts: 3, Fingerprint: "fp-" + id})
	}
	ps = append(ps, &backend.JobInsertParams{ID: "nofp", Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`),
		SchemaVersion: 1, MaxAttempts: 3})
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ps}); err != nil {
		t.Fatal(err)
	}
	// An insert of a job that exists already writes nothing.
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ps[:1]}); err != nil {
		t.Fatal(err)
	}
	want("inserted", "a", "b", "c")
	exec(`INSERT INTO {s}.jobs (id, queue, kind, state, fingerprint, scheduled_at, created_at, state_changed_at)
		SELECT 'h' || g, 'q', 'k', 'completed', 'fp-h' || g, g, g, g FROM generate_series(1, 3) g`)
	want("inserted by hand", "a", "b", "c", "h1", "h2", "h3")

	exec(`UPDATE {s}.jobs SET fingerprint = 'fp-b2' WHERE id = 'b'`)
	exec(`UPDATE {s}.jobs SET fingerprint = '' WHERE id = 'c'`)
	exec(`UPDATE {s}.jobs SET fingerprint = 'fp-nofp' WHERE id = 'nofp'`)
	want("fingerprints changed", "a", "b", "h1", "h2", "h3", "nofp")

	res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "l", Limit: 10})
	if err != nil || len(res.Jobs) != 4 {
		t.Fatalf("claim: %v %v", res, err)
	}
	var items []backend.JobCompleteItem
	for _, j := range res.Jobs {
		items = append(items, backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: "l", Fence: j.Lease.Fence}})
	}
	if _, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items}); err != nil {
		t.Fatal(err)
	}
	want("claimed and completed", "a", "b", "h1", "h2", "h3", "nofp")

	exec(`DELETE FROM {s}.jobs WHERE id = 'a'`)
	exec(`DELETE FROM {s}.jobs WHERE id LIKE 'h%' AND id <> 'h2'`)
	want("deleted", "b", "h2", "nofp")
}
