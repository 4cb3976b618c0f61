// Package sqlitetest gives tests a fresh SQLite store cheaply: the schema
// is migrated once per test binary into a template, and each test opens a
// copy of it in its own temporary directory.
package sqlitetest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/backend/sqlite"
)

var (
	once     sync.Once
	template []byte
	tmplErr  error
)

// makeTemplate migrates an empty file and keeps its bytes.
func makeTemplate() {
	dir, err := os.MkdirTemp("", "sluice-sqlitetest-")
	if err != nil {
		tmplErr = err
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "template.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		tmplErr = err
		return
	}
	if err := s.Checkpoint(context.Background()); err != nil {
		s.Close()
		tmplErr = err
		return
	}
	if err := s.Close(); err != nil {
		tmplErr = err
		return
	}
	template, tmplErr = os.ReadFile(path)
}

// Path writes a migrated, empty database file into tb's temporary
// directory and returns its path, for tests that open it themselves (or
// hand it to child processes).
func Path(tb testing.TB) string {
	tb.Helper()
	once.Do(makeTemplate)
	if tmplErr != nil {
		tb.Fatalf("sqlitetest: template: %v", tmplErr)
	}
	path := filepath.Join(tb.TempDir(), "sluice.db")
	if err := os.WriteFile(path, template, 0o600); err != nil {
		tb.Fatalf("sqlitetest: %v", err)
	}
	return path
}

// New opens a fresh, migrated store for one test and closes it when the
// test ends.
func New(tb testing.TB) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), Path(tb), sqlite.Options{})
	if err != nil {
		tb.Fatalf("sqlitetest: open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
