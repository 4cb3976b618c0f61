package redis_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/sluicetype"
)

// archivedStore fills a fresh namespace with n archived jobs over ten
// kinds (ten error groups), archived at claim past their deadline: a
// thousand per script. It reports the server's memory per archived job.
func archivedStore(b *testing.B, n int) *redis.Store {
	b.Helper()
	s := redistest.New(b)
	mem0 := usedMemory(b, s)
	archive(b, s, n)
	b.ReportMetric(float64(usedMemory(b, s)-mem0)/float64(n), "server-bytes/job")
	return s
}

// archive inserts n jobs over ten kinds and archives them at claim past
// their deadline, a thousand per script: ten error groups of the one
// pattern below.
func archive(tb testing.TB, s *redis.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)
	for i := 0; i < n; i += 1000 {
		js := benchJobs(min(1000, n-i), i)
		for k, j := range js {
			j.Kind = fmt.Sprintf("k%d", (i+k)%10)
			j.Deadline = &past
		}
		if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: js}); err != nil {
			tb.Fatal(err)
		}
		const msg = "deadline passed before the job ran"
		if _, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "default", WorkerID: "w", LeaseID: "l",
			PastDeadline: backend.ClaimDeadlineWrite{To: sluicetype.StateArchived, Reason: sluicetype.ReasonDeadlineExceeded,
				LastError: msg, Pattern: msg, Event: backend.EventWrite{Kind: sluicetype.EventArchived, From: sluicetype.StateAvailable,
					To: sluicetype.StateArchived, Message: msg}}}); err != nil {
			tb.Fatal(err)
		}
	}
}

// archivedCount is SLUICE_BENCH_ARCHIVED, the archived jobs the
// benchmarks of this file seed (100,000 when unset).
func archivedCount() int {
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_ARCHIVED")); err == nil && v > 0 {
		return v
	}
	return 100000
}

func usedMemory(b *testing.B, s *redis.Store) int64 {
	info, err := redis.Client(s).Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkArchivedReads reads the first page, the counts and the error
// groups of a namespace of SLUICE_BENCH_ARCHIVED archived jobs (100,000
// by default; the figure is at 1,000,000).
func BenchmarkArchivedReads(b *testing.B) {
	n := archivedCount()
	s := archivedStore(b, n)
	ctx := context.Background()
	arch := sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}}
	b.Run("FirstPage", func(b *testing.B) {
		for b.Loop() {
			js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: arch, Limit: 50})
			if err != nil || len(js) != 50 {
				b.Fatal(len(js), err)
			}
		}
	})
	b.Run("Count", func(b *testing.B) {
		for b.Loop() {
			c, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: arch})
			if err != nil || c != int64(n) {
				b.Fatal(c, err)
			}
		}
	})
	b.Run("ErrorGroups", func(b *testing.B) {
		for b.Loop() {
			gs, err := s.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: arch})
			if err != nil || len(gs) != 10 {
				b.Fatal(len(gs), err)
			}
		}
	})
}

// BenchmarkBulkRetryArchived retries every archived job of a namespace of
// SLUICE_BENCH_ARCHIVED (100,000) in batches of 1,000, one script each.
func BenchmarkBulkRetryArchived(b *testing.B) {
	n := archivedCount()
	for b.Loop() {
		b.StopTimer()
		s := archivedStore(b, n)
		benchBulkRetry(b, s, sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}}, 1000, n)
	}
}

// BenchmarkBulkRetryErrorGroup retries one error group (a tenth of
// SLUICE_BENCH_ARCHIVED archived jobs, 100,000 by default), as `:errors`
// and b do in the console: its window, as the engine asks for it, is ten
// batches of the group's ids.
func BenchmarkBulkRetryErrorGroup(b *testing.B) {
	n := archivedCount()
	for b.Loop() {
		b.StopTimer()
		s := archivedStore(b, n)
		benchBulkRetry(b, s, sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}, Kinds: []string{"k3"},
			ErrorPattern: "deadline passed before the job ran"}, 10*1000, n/10)
	}
}

// BenchmarkBulkRetryByErrorText retries every archived job of
// SLUICE_BENCH_ARCHIVED (100,000) selected by its error text, a condition
// only Go evaluates: each batch's jobs are judged in Go before its script
// runs, over the engine's window of ten batches at most.
func BenchmarkBulkRetryByErrorText(b *testing.B) {
	n := archivedCount()
	for b.Loop() {
		b.StopTimer()
		s := archivedStore(b, n)
		benchBulkRetry(b, s, sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}, Error: "deadline passed"}, 10*1000, n)
	}
}

// benchBulkRetry runs a retry of the jobs f selects on s to its end, in
// batches of 1,000 over windows of window ids, timed from its first batch;
// want is how many it must retry.
func benchBulkRetry(b *testing.B, s *redis.Store, f sluicetype.Filter, window, want int) {
	b.Helper()
	ctx := context.Background()
	spec, err := backend.SpecFor(sluicetype.ActionRetry)
	if err != nil {
		b.Fatal(err)
	}
	sel, _ := spec.Narrow(f)
	op, err := s.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op", Action: sluicetype.ActionRetry, Selector: sel})
	if err != nil {
		b.Fatal(err)
	}
	lease, err := s.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "h", TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	t0 := time.Now()
	var slowest time.Duration
	cursor, done, batches := "", 0, 0
	for {
		t1 := time.Now()
		res, err := s.OperationProcessBatch(ctx, &backend.OperationProcessBatchParams{ID: op.ID, Holder: "h", Fence: lease.Fence,
			After: cursor, Spec: spec, Selector: sel, Cutoff: op.CreatedAt, Limit: 1000, Window: window, TTL: time.Minute,
			Event: backend.EventWrite{Kind: sluicetype.EventRetried, Actor: "bench", To: sluicetype.StateAvailable}})
		if err != nil {
			b.Fatal(err)
		}
		batches++
		slowest = max(slowest, time.Since(t1))
		cursor = res.Cursor
		done = int(res.Operation.Succeeded)
		if res.Exhausted {
			break
		}
	}
	if done != want {
		b.Fatalf("retried %d of %d", done, want)
	}
	b.ReportMetric(float64(want)/time.Since(t0).Seconds(), "jobs/s")
	b.ReportMetric(float64(want)/float64(batches), "jobs/batch")
	b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-batch-ms")
}
