package redis_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
)

// TestEngineWakeupsAcrossStores: two engines on two stores of one
// namespace; an enqueue in one wakes the other's idle worker (poll
// interval 1 h) and reaches its Subscribe.
func TestEngineWakeupsAcrossStores(t *testing.T) {
	t.Parallel()
	a := redistest.New(t)
	backendtest.CrossProcessWakeups(t, a, redistest.Reopen(t, a))
}

// TestFaultEngineSubscriberKilled: the worker's pub/sub connection is
// killed (CLIENT KILL ID of that one connection); jobs still run.
func TestFaultEngineSubscriberKilled(t *testing.T) {
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("SKIP: fault test; set SLUICE_FAULT_TESTS=1")
	}
	a := redistest.New(t)
	b := redistest.Reopen(t, a)
	backendtest.WakeupPollFallback(t, a, b, func(t *testing.T) {
		ctx := context.Background()
		list, err := redis.Client(a).ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		killed := 0
		for _, line := range strings.Split(list, "\n") {
			// Only this namespace's subscriber: named by the store, in
			// subscription mode.
			if strings.Contains(line, " name=sluice:"+a.Namespace()+" ") && strings.Contains(line, " sub=1 ") {
				id := strings.TrimPrefix(strings.Fields(line)[0], "id=")
				if err := redis.Client(a).Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
					t.Fatal(err)
				}
				killed++
			}
		}
		if killed != 1 {
			t.Fatalf("killed %d subscribers, want 1", killed)
		}
	})
}
