package redisserver

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestPrivateServerRestart: what a private server keeps across a SIGKILL
// and a SHUTDOWN, by fsync policy. Without AOF a restart loses every key;
// with appendfsync always a SIGKILL loses none it acknowledged; with
// everysec a SIGTERM (Redis fsyncs on shutdown) loses none.
func TestPrivateServerRestart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fsync string
		kill  bool
		kept  bool
	}{
		{"no-aof-sigterm", "", false, false},
		{"always-sigkill", "always", true, true},
		{"everysec-sigterm", "everysec", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := Private(t, Options{AppendFsync: tc.fsync})
			c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			c.Close()
			halt := s.Stop
			if tc.kill {
				halt = s.Kill
			}
			if err := halt(ctx); err != nil {
				t.Fatal(err)
			}
			if cn, err := net.Dial("tcp", s.Addr()); err == nil {
				cn.Close()
				t.Fatal("the server takes connections after it was stopped")
			}
			if err := s.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			c = goredis.NewClient(&goredis.Options{Addr: s.Addr()})
			defer c.Close()
			v, err := c.Get(ctx, "k").Result()
			switch {
			case tc.kept && (err != nil || v != "v"):
				t.Errorf("after the restart: %q, %v; want the key kept", v, err)
			case !tc.kept && !errors.Is(err, goredis.Nil):
				t.Errorf("after the restart: %q, %v; want the key gone (no AOF)", v, err)
			}
		})
	}
}

func TestClientIDs(t *testing.T) {
	t.Parallel()
	list := "id=3 addr=127.0.0.1:1 laddr=127.0.0.1:6379 fd=8 name=sluice:a age=1\n" +
		"id=4 addr=127.0.0.1:2 laddr=127.0.0.1:6379 fd=9 name=sluice:ab age=1\n" +
		"id=5 addr=127.0.0.1:3 laddr=127.0.0.1:6379 fd=10 name= age=1\n" +
		"id=6 addr=127.0.0.1:4 laddr=127.0.0.1:6379 fd=11 name=sluice:a age=2\n"
	cases := []struct {
		name string
		want []string
	}{
		{"sluice:a", []string{"3", "6"}},
		{"sluice:ab", []string{"4"}},
		{"other", nil},
	}
	for _, tc := range cases {
		if got := clientIDs(list, tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("clientIDs(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
