package redis_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/internal/redisserver"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestBulkRetryCPU reports the Redis CPU a bulk retry costs per job on a
// private server: SLUICE_BULKRETRY_CPU=N jobs archived over ten kinds and
// ten error groups, then retried in batches of 1,000 (as
// BenchmarkBulkRetryArchived), with the commands its scripts called per
// job. It asserts only that every job was retried; it runs only when
// SLUICE_BULKRETRY_CPU is set:
//
//	SLUICE_BULKRETRY_CPU=100000 go test -run TestBulkRetryCPU -v ./backend/redis/
func TestBulkRetryCPU(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SLUICE_BULKRETRY_CPU"))
	if n <= 0 {
		t.Skip("SLUICE_BULKRETRY_CPU=N unset")
	}
	ctx := context.Background()
	addr := redisserver.Private(t, redisserver.Options{}).Addr()
	s := redistest.NewOn(t, "redis://"+addr+"/0?read_timeout=2m")
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	cpuPhase(t, c, n, "archive", func() { archive(t, s, n) })
	spec, err := backend.SpecFor(sluicetype.ActionRetry)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := spec.Narrow(sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}})
	op, err := s.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op", Action: sluicetype.ActionRetry, Selector: sel})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := s.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var done int64
	batches := 0
	cpuPhase(t, c, n, "retry", func() {
		cursor := ""
		for {
			res, err := s.OperationProcessBatch(ctx, &backend.OperationProcessBatchParams{ID: op.ID, Holder: "h", Fence: lease.Fence,
				After: cursor, Spec: spec, Selector: sel, Cutoff: op.CreatedAt, Limit: 1000, Window: 10000, TTL: time.Minute,
				Event: backend.EventWrite{Kind: sluicetype.EventRetried, Actor: "bench", To: sluicetype.StateAvailable}})
			if err != nil {
				t.Fatal(err)
			}
			batches++
			cursor, done = res.Cursor, res.Operation.Succeeded
			if res.Exhausted {
				return
			}
		}
	})
	if done != int64(n) {
		t.Fatalf("retried %d of %d", done, n)
	}
	t.Logf("%d batches, %.1f jobs a batch", batches, float64(n)/float64(batches))
	// The retried jobs carry their last error's pattern: what their claim
	// and completion cost, against TestHotPathCPU's jobs that never failed.
	var items []backend.JobCompleteItem
	cpuPhase(t, c, n, "claim", func() { items = claimAll(t, s, "l2", nil) })
	if len(items) != n {
		t.Fatalf("claimed %d of %d", len(items), n)
	}
	cpuPhase(t, c, n, "complete", func() { completeAll(t, s, items) })
}
