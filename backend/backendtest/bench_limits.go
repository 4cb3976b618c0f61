package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// BenchLimits measures the claim and ack loop of one kind (batches of
// 10; one op is one job) with no limit set, under a concurrency limit of
// 1,000 with held running jobs for the claim to count, and under a rate
// limit that never binds (the cost of the check and of the starts log).
// Each store's bench_test.go runs it:
//
//	go test ./backend/sqlite -run '^$' -bench 'BenchmarkLimits' -count 5
func BenchLimits(b *testing.B, newStore func(testing.TB) backend.Store) {
	cases := []struct {
		name  string
		limit *backend.LimitSetParams
		held  int
	}{
		{"none", nil, 0},
		{"none_held=500", nil, 500},
		{"concurrency=1000_held=500", &backend.LimitSetParams{Scope: sluicetype.LimitKind, Name: "k", Concurrency: 1000}, 500},
		{"rate=1e9/s", &backend.LimitSetParams{Scope: sluicetype.LimitKind, Name: "k", Rate: 1_000_000_000}, 0},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b)
			n := b.N + c.held + 10
			for off := 0; off < n; off += 1000 {
				var ps []*backend.JobInsertParams
				for i := off; i < min(n, off+1000); i++ {
					ps = append(ps, jobParams(fmt.Sprintf("b-%09d", i), "q"))
				}
				if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ps}); err != nil {
					b.Fatal(err)
				}
			}
			claim := func(limit int) *backend.JobClaimResult {
				res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "l",
					Limit: limit, Kinds: kindsK, LeaseDuration: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				return res
			}
			for held := 0; held < c.held; held += len(claim(min(100, c.held-held)).Jobs) {
			}
			if c.limit != nil {
				if err := limitStore(b, s).LimitSet(ctx, c.limit); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			done := 0
			for done < b.N {
				res := claim(min(10, b.N-done))
				if len(res.Jobs) == 0 {
					b.Fatal("nothing to claim")
				}
				items := make([]backend.JobCompleteItem, len(res.Jobs))
				for i, j := range res.Jobs {
					items[i] = backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence}}
				}
				if _, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items}); err != nil {
					b.Fatal(err)
				}
				done += len(res.Jobs)
			}
			b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
