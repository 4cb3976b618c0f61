package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/sluicetype"
)

func benchJobs(n, offset int) []*backend.JobInsertParams {
	out := make([]*backend.JobInsertParams, n)
	for i := range out {
		id := fmt.Sprintf("%036d", offset+i)
		out[i] = &backend.JobInsertParams{
			ID: id, Queue: "default", Kind: "email", SchemaVersion: 1, MaxAttempts: 25,
			Payload:     json.RawMessage(`{"to":"someone@example.com","n":` + fmt.Sprint(offset+i) + `}`),
			Fingerprint: "fp" + id,
		}
	}
	return out
}

// BenchmarkInsert inserts batches of 1000 jobs, one script each.
func BenchmarkInsert(b *testing.B) {
	ctx := context.Background()
	s := redistest.New(b)
	total := 0
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		batch := benchJobs(1000, i*1000)
		b.StartTimer()
		if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: batch, RefuseQuarantined: true}); err != nil {
			b.Fatal(err)
		}
		total += len(batch)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaimComplete claims a batch and completes it in one script
// each, over and over: the store's bare claim/ack loop.
func BenchmarkClaimComplete(b *testing.B) {
	for _, batch := range []int{25, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			s := redistest.New(b)
			n := max(b.N, 1) * batch
			for i := 0; i < n; i += 1000 {
				if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: benchJobs(min(1000, n-i), i)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			total := 0
			for range b.N {
				c, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", WorkerID: "w", LeaseID: "l", Limit: batch,
					Kinds: map[string]int{"email": 1}, LeaseDuration: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				items := make([]backend.JobCompleteItem, len(c.Jobs))
				for i, j := range c.Jobs {
					items[i] = backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: "l", Fence: j.Fence}}
				}
				if _, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items, EndProbation: true}); err != nil {
					b.Fatal(err)
				}
				total += len(items)
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkListManyKinds lists the first page of one queue's available
// jobs, newest first, when the queue holds many kinds: available and
// completed jobs live in one set per queue and kind (sqk), so the page
// merges one set per kind.
func BenchmarkListManyKinds(b *testing.B) {
	for _, kinds := range []int{1, 20, 200} {
		b.Run(fmt.Sprintf("kinds=%d", kinds), func(b *testing.B) {
			ctx := context.Background()
			s := redistest.New(b)
			jobs := benchJobs(kinds*50, 0)
			for i, j := range jobs {
				j.Kind = fmt.Sprintf("kind%03d", i%kinds)
			}
			for i := 0; i < len(jobs); i += 1000 {
				if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs[i:min(i+1000, len(jobs))]}); err != nil {
					b.Fatal(err)
				}
			}
			f := sluicetype.Filter{States: []sluicetype.State{sluicetype.StateAvailable}, Queues: []string{"default"}}
			for b.Loop() {
				js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: f, Limit: 50})
				if err != nil || len(js) != 50 {
					b.Fatalf("list: %d jobs, %v", len(js), err)
				}
			}
		})
	}
}
