package storeurl

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

func TestParseStoreURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url, backend, path string
		err                error
	}{
		{"sqlite://sluice.db", "sqlite", "sluice.db", nil},
		{"sqlite://dir/x.db", "sqlite", "dir/x.db", nil},
		{"sqlite:///abs/path.db", "sqlite", "/abs/path.db", nil},
		{"sqlite:x.db", "sqlite", "x.db", nil},
		{"plain.db", "sqlite", "plain.db", nil},
		{"/abs/plain.db", "sqlite", "/abs/plain.db", nil},
		{"postgres://root@127.0.0.1:5432/db?sslmode=disable", "postgres", "", nil},
		{"postgresql://h/db", "postgres", "", nil},
		{"redis://127.0.0.1:6379/0", "redis", "", nil},
		{"rediss://u:p@127.0.0.1:6380/1?ns=jobs", "redis", "", nil},
		{"redis+cluster://127.0.0.1:7001,127.0.0.1:7002?ns=jobs", "redis", "", nil},
		{"redis+cluster://", "", "", engine.ErrInvalid},
		{"mysql://h/db", "", "", engine.ErrInvalid},
		{"", "", "", engine.ErrInvalid},
		{"sqlite://", "", "", engine.ErrInvalid},
	}
	for _, c := range cases {
		got, err := Parse(c.url)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Parse(%q) err = %v, want %v", c.url, err, c.err)
			}
			continue
		}
		if err != nil || got.Backend != c.backend || got.Path != c.path {
			t.Errorf("Parse(%q) = %+v, %v; want %s %q", c.url, got, err, c.backend, c.path)
		}
	}
}

// A store that cannot be opened says why without showing the password
// of its URL (a role that does not exist, a Redis that is not there).
func TestOpenStoreErrorHidesPassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://nosuchrole:hunter2@127.0.0.1:5432/test?sslmode=disable&connect_timeout=2",
		"redis://:hunter2@127.0.0.1:1/0",
	} {
		s, err := Open(context.Background(), u, nil)
		if s != nil || err == nil {
			t.Errorf("Open(%q) = %v, %v; want an error", u, s, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestOpenStoreSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, u := range []string{"sqlite://" + filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")} {
		s, err := Open(context.Background(), u, nil)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if s.Backend() != "sqlite" {
			t.Errorf("backend = %q", s.Backend())
		}
		s.Close()
	}
}
