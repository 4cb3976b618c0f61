package redis_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redisserver"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestDurabilityWarningsPrivate: on private servers of known
// configuration, the reasons a server loses jobs silently are logged once
// at open (WARN), and reach sluicetype.Meta, GET /meta and api.Client (what
// `sluice tui --api` reads); a durable server shows none.
func TestDurabilityWarningsPrivate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want []string // substrings, one warning each
	}{
		{"durable", []string{"--appendonly", "yes", "--maxmemory-policy", "noeviction"}, nil},
		{"volatile and evicting", []string{"--save", "", "--appendonly", "no", "--maxmemory-policy", "allkeys-lru"},
			[]string{"keeps nothing on disk", "maxmemory-policy is allkeys-lru"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			s, err := redis.Open(ctx, redistest.URLOn(t, redisserver.Private(t, redisserver.Options{Args: tc.args}).URL()), redis.Options{Migrate: true, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			e, err := engine.New(s, engine.Config{NoMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(api.NewServer(e, api.ServerOptions{Heartbeat: time.Second}))
			t.Cleanup(srv.Close)
			local, err := e.Meta(ctx)
			if err != nil {
				t.Fatal(err)
			}
			remote, err := api.NewClient(srv.URL, "", api.ClientOptions{Timeout: 20 * time.Second}).Meta(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []*sluicetype.Meta{local, remote} {
				if len(m.Warnings) != len(tc.want) {
					t.Fatalf("warnings %q, want %d", m.Warnings, len(tc.want))
				}
				for i, w := range tc.want {
					if !strings.Contains(m.Warnings[i], w) {
						t.Errorf("warning %d %q lacks %q", i, m.Warnings[i], w)
					}
				}
			}
			for _, w := range tc.want {
				if n := strings.Count(logs.String(), w); n != 1 {
					t.Errorf("%q logged %d times at open, want once:\n%s", w, n, logs.String())
				}
			}
			if len(tc.want) == 0 && logs.Len() > 0 {
				t.Errorf("a durable server logged:\n%s", logs.String())
			}
		})
	}
}
