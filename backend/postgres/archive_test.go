package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestColdArchive evicts jobs in two months (the eviction time stands in
// for the store's clock), reads them back from the archive, and drops
// the closed month once it is past the archive's retention. Jobs of a
// queue that did not opt in are deleted without a copy.
func TestColdArchive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := fmt.Sprintf("archive_%d", time.Now().UnixNano())
	s, err := Open(ctx, planURL(t)+"&schema="+schema+"&archive_queues=audit", Options{Migrate: true, NoListen: true, MaxConns: 2,
		ArchiveRetention: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.pool.Exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		s.Close()
	})
	finish := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			q := "audit"
			if id[0] == 'p' {
				q = "plain"
			}
			if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{ID: id, Queue: q, Kind: "k",
				Payload: []byte(`{"id":"` + id + `"}`), SchemaVersion: 1, MaxAttempts: 1}}}); err != nil {
				t.Fatal(err)
			}
			res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: q, WorkerID: "w", LeaseID: "l-" + id, Limit: 1})
			if err != nil || len(res.Jobs) != 1 {
				t.Fatal(res, err)
			}
			j := res.Jobs[0]
			if out, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence}}}}); err != nil || out[0] != nil {
				t.Fatal(out, err)
			}
		}
	}
	sweep := func(at time.Time) int {
		t.Helper()
		n, err := s.jobDeleteExpired(ctx, &backend.JobDeleteExpiredParams{Retention: map[sluicetype.State]time.Duration{sluicetype.StateCompleted: 0}}, at)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	archived := func() []string {
		t.Helper()
		js, err := s.ArchiveList(ctx, &ArchiveListParams{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range js {
			ids = append(ids, j.ID+"@"+j.EvictedAt.Format("2006-01"))
		}
		return ids
	}
	partitions := func() []string {
		t.Helper()
		names, err := queryStrings(ctx, s.pool, `SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace
			WHERE n.nspname = $1 AND p.relname = 'job_archive' ORDER BY 1`, schema)
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	finish("a1", "a2", "p1")
	if n := sweep(time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)); n != 3 {
		t.Fatalf("January sweep deleted %d", n)
	}
	if got, want := partitions(), []string{"job_archive_202601", "job_archive_202602"}; !slices.Equal(got, want) {
		t.Fatalf("partitions %v, want %v (this month and the next, ahead)", got, want)
	}
	finish("a3")
	if n := sweep(time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)); n != 1 {
		t.Fatalf("February sweep deleted %d", n)
	}
	if got, want := archived(), []string{"a3@2026-02", "a2@2026-01", "a1@2026-01"}; !slices.Equal(got, want) {
		t.Fatalf("archive %v, want %v", got, want)
	}
	copies, err := s.ArchiveGet(ctx, "a1")
	if err != nil || len(copies) != 1 || copies[0].State != sluicetype.StateCompleted || string(copies[0].Payload) != `{"id":"a1"}` || copies[0].Queue != "audit" {
		t.Fatalf("archived a1: %+v %v", copies, err)
	}
	if _, err := s.ArchiveGet(ctx, "p1"); !errors.Is(err, sluicetype.ErrNotFound) {
		t.Fatalf("p1 (queue not opted in) archived: %v", err)
	}
	if _, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "a1"}); !errors.Is(err, sluicetype.ErrNotFound) {
		t.Fatalf("a1 still in jobs: %v", err)
	}
	// January closed on February 1st; a day of retention later it goes.
	sweep(time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC))
	if got, want := partitions(), []string{"job_archive_202602", "job_archive_202603"}; !slices.Equal(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
	if got, want := archived(), []string{"a3@2026-02"}; !slices.Equal(got, want) {
		t.Fatalf("archive after the drop %v, want %v", got, want)
	}
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil || len(counts) != 0 {
		t.Fatalf("counters after eviction: %v %v", counts, err)
	}
}
