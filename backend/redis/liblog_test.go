package redis_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/internal/redisserver"
	"github.com/sluicehq/sluice/internal/testlog"
)

// TestClientLogsGoToTheStoreLogger: go-redis's own lines about a server
// that went away ("failed to dial after 5 attempts") reach the store's
// logger, not stderr, which in the console is the screen. Not parallel:
// the library's logger is one per process, and the store opened last with
// a logger has it.
func TestClientLogsGoToTheStoreLogger(t *testing.T) {
	ctx := context.Background()
	srv := redisserver.Private(t, redisserver.Options{})
	var buf testlog.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := redis.Open(ctx, redistest.URLOn(t, srv.URL()), redis.Options{Migrate: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Back up before the test ends, for the namespace's cleanup.
	defer func() {
		if err := srv.Resume(ctx); err != nil {
			t.Error(err)
		}
	}()
	if _, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{}); err == nil {
		t.Fatal("a count on a stopped server succeeded")
	}
	if got := buf.String(); !strings.Contains(got, "redis client: connection pool: failed to dial") {
		t.Fatalf("the store's log lacks go-redis's dial failure; it holds:\n%s", got)
	}
}
