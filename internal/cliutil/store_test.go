package cliutil

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
		{"mysql://h/db", "", "", engine.ErrInvalid},
		{"", "", "", engine.ErrInvalid},
		{"sqlite://", "", "", engine.ErrInvalid},
	}
	for _, c := range cases {
		got, err := ParseStoreURL(c.url)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("ParseStoreURL(%q) err = %v, want %v", c.url, err, c.err)
			}
			continue
		}
		if err != nil || got.Backend != c.backend || got.Path != c.path {
			t.Errorf("ParseStoreURL(%q) = %+v, %v; want %s %q", c.url, got, err, c.backend, c.path)
		}
	}
}

func TestOpenStoreNotBuilt(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"redis://127.0.0.1:6379/0"} {
		s, err := OpenStore(context.Background(), u, nil)
		if s != nil || !errors.Is(err, engine.ErrUnsupported) || !strings.Contains(err.Error(), "not built yet") {
			t.Errorf("OpenStore(%q) = %v, %v; want an ErrUnsupported saying not built yet", u, s, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// TestOpenStorePostgres: a server that does not answer is an error that
// does not show the URL's password.
func TestOpenStorePostgres(t *testing.T) {
	t.Parallel()
	s, err := OpenStore(context.Background(), "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=5", nil)
	if s != nil || err == nil {
		t.Fatalf("OpenStore on a closed port = %v, %v", s, err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}
}

func TestOpenStoreSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, u := range []string{"sqlite://" + filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")} {
		s, err := OpenStore(context.Background(), u, nil)
		if err != nil {
			t.Fatalf("OpenStore(%q): %v", u, err)
		}
		if s.Backend() != "sqlite" {
			t.Errorf("backend = %q", s.Backend())
		}
		s.Close()
	}
}
