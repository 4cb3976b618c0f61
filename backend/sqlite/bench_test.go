package sqlite_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

func benchJobs(n, offset int) []*engine.JobInsertParams {
	out := make([]*engine.JobInsertParams, n)
	for i := range out {
		id := fmt.Sprintf("%036d", offset+i)
		out[i] = &engine.JobInsertParams{
			ID: id, Queue: "default", Kind: "email", SchemaVersion: 1, MaxAttempts: 25,
			Payload:     json.RawMessage(`{"to":"someone@example.com","n":` + fmt.Sprint(offset+i) + `}`),
			Fingerprint: "fp" + id,
		}
	}
	return out
}

// BenchmarkInsert inserts batches of 1000 jobs.
func BenchmarkInsert(b *testing.B) {
	s := sqlitetest.New(b)
	b.ResetTimer()
	total := 0
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		batch := benchJobs(1000, i*1000)
		b.StartTimer()
		if _, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: batch}); err != nil {
			b.Fatal(err)
		}
		total += len(batch)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimComplete inserts jobs once, then claims 100 and completes
// them in one batch, over and over: the bare claim/ack loop.
func BenchmarkClaimComplete(b *testing.B) {
	s := sqlitetest.New(b)
	const batch = 100
	n := max(b.N, 1) * batch
	for off := 0; off < n; off += 1000 {
		if _, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: benchJobs(min(1000, n-off), off)}); err != nil {
			b.Fatal(err)
		}
	}
	items := make([]engine.JobCompleteItem, 0, batch)
	done := 0
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		res, err := s.JobClaim(ctx, &engine.JobClaimParams{
			Queue: "default", WorkerID: "w", LeaseID: "l", Limit: batch,
			Kinds: map[string]int{"email": 1}, LeaseDuration: time.Minute,
		})
		if err != nil {
			b.Fatal(err)
		}
		items = items[:0]
		for _, j := range res.Jobs {
			items = append(items, engine.JobCompleteItem{JobRef: engine.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence}})
		}
		out, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: items})
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range out {
			if e != nil {
				b.Fatal(e)
			}
		}
		done += len(res.Jobs)
	}
	b.StopTimer()
	if done != b.N*batch {
		b.Fatalf("processed %d jobs, want %d", done, b.N*batch)
	}
	b.ReportMetric(float64(done)/time.Since(start).Seconds(), "jobs/s")
}
