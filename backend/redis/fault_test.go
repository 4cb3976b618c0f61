package redis_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestFaultClientKill runs an engine with workers on a Redis store while
// its connections are killed again and again (CLIENT KILL ID of this
// store's connections only): the client reconnects, every job completes,
// none is left running, and no crash is charged to a job whose process
// lived.
func TestFaultClientKill(t *testing.T) {
	if os.Getenv("SLUICE_FAULT_TESTS") != "1" {
		t.Skip("SKIP: fault test; set SLUICE_FAULT_TESTS=1")
	}
	ctx := context.Background()
	s := redistest.New(t)
	const n = 2000
	e, err := engine.New(s, engine.Config{
		Queues:              map[string]engine.QueueConfig{"q": {Concurrency: 16}},
		LeaseDuration:       2 * time.Second,
		HeartbeatInterval:   500 * time.Millisecond,
		PollInterval:        50 * time.Millisecond,
		MaintenanceInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]int{}
	if err := e.Register(engine.Kind{Name: "k", MaxAttempts: 25, Handler: func(ctx context.Context, j *sluicetype.Job) error {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	ps := make([]sluicetype.EnqueueParams, n)
	for i := range ps {
		ps[i] = sluicetype.EnqueueParams{ID: fmt.Sprintf("j%05d", i), Queue: "q", Kind: "k", Payload: []byte(`{}`)}
	}
	for i := 0; i < n; i += 500 {
		if _, err := e.EnqueueMany(ctx, ps[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	admin := redis.Client(redistest.New(t)) // a connection of another namespace
	name := "sluice:" + s.Namespace()
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{Queue: "q"})
		if err == nil && c["q"][sluicetype.StateCompleted] == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d kills: counts %v (%v)", kills, c, err)
		}
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " name="+name+" ") {
				id := strings.TrimPrefix(strings.Fields(line)[0], "id=")
				if admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
					kills++
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if kills == 0 {
		t.Fatal("no connection was killed")
	}
	js, err := s.JobListPage(ctx, &backend.JobListPageParams{Limit: n + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != n {
		t.Fatalf("%d jobs listed, want %d", len(js), n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, j := range js {
		if j.State != sluicetype.StateCompleted || j.CrashAttempt != 0 {
			t.Fatalf("job %s: %s, crash_attempt %d", j.ID, j.State, j.CrashAttempt)
		}
		if runs[j.ID] == 0 {
			t.Fatalf("job %s completed without running", j.ID)
		}
	}
	again := 0
	for _, r := range runs {
		if r > 1 {
			again++
		}
	}
	t.Logf("%d jobs completed through %d connection kills; %d ran more than once (a lease lost with its answer)", n, kills, again)
}
