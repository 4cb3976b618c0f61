package postgres_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
)

// BenchmarkClaimComplete is the bare store loop of a worker: claim a
// batch, complete it in one statement. One op is one job.
func BenchmarkClaimComplete(b *testing.B) {
	for _, batch := range []int{1, 10, 50} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			ctx := context.Background()
			s := pgtest.New(b)
			jobs := make([]*backend.JobInsertParams, 0, 1000)
			for i := 0; i < b.N; i += len(jobs) {
				jobs = jobs[:0]
				for k := i; k < min(b.N, i+1000); k++ {
					jobs = append(jobs, &backend.JobInsertParams{ID: "j" + strconv.Itoa(k), Queue: "q", Kind: "k",
						Payload: []byte(`{"n":1}`), SchemaVersion: 1, MaxAttempts: 3})
				}
				if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			done := 0
			for done < b.N {
				res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "l" + strconv.Itoa(done),
					Limit: batch, LeaseDuration: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				items := make([]backend.JobCompleteItem, len(res.Jobs))
				for i, j := range res.Jobs {
					items[i] = backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence}}
				}
				if _, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items}); err != nil {
					b.Fatal(err)
				}
				done += len(res.Jobs)
				if len(res.Jobs) == 0 {
					b.Fatal("nothing to claim")
				}
			}
		})
	}
}
