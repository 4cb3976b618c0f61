// Package storeurl opens the store a URL names, of any backend: sqlite://,
// postgres:// and redis://. It is the registry of store URLs the sluice
// command and the benchmark binary (internal/bench) share; it compiles
// every backend, so a program or test that opens one store opens it with
// its backend package instead.
package storeurl

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redact"
)

// Target is a parsed store URL.
type Target struct {
	Backend string // "sqlite", "postgres", "redis"
	Path    string // sqlite: the file
}

// Parse names the backend of a store URL: sqlite://FILE (relative
// to the working directory), sqlite:///abs/path, a bare file path (SQLite),
// postgres:// or postgresql://, redis:// or rediss://, and a Redis Cluster
// as redis+cluster://host1:port,host2:port (rediss+cluster:// with TLS).
func Parse(raw string) (Target, error) {
	if strings.TrimSpace(raw) == "" {
		return Target{}, fmt.Errorf("%w: empty store url (try sqlite://sluice.db)", engine.ErrInvalid)
	}
	scheme, _, hasScheme := strings.Cut(raw, "://")
	if !hasScheme && strings.HasPrefix(raw, "sqlite:") {
		scheme, hasScheme = "sqlite", true
	}
	if !hasScheme {
		scheme = "sqlite"
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		p, err := sqlite.ParseURL(raw)
		if err != nil {
			return Target{}, err
		}
		return Target{Backend: "sqlite", Path: p}, nil
	case "postgres", "postgresql":
		return Target{Backend: "postgres"}, nil
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		if _, err := redis.ParseURL(raw); err != nil {
			return Target{}, err
		}
		return Target{Backend: "redis"}, nil
	}
	return Target{}, fmt.Errorf("%w: store url %s: unknown scheme %q (want sqlite://, postgres:// or redis://)",
		engine.ErrInvalid, redact.URL(raw), scheme)
}

// Open opens the store a URL names, with the store's diagnostics
// sent to log (discarded when nil). A SQLite file is created and migrated
// as it opens; a PostgreSQL schema only with migrate=true in the URL
// (otherwise a schema behind or ahead is refused, naming `sluice
// migrate`); a Redis namespace is created when empty.
func Open(ctx context.Context, rawURL string, log *slog.Logger) (backend.Store, error) {
	return open(ctx, rawURL, log, false, false)
}

// OpenMigrating opens the store a URL names as Open does, and
// also brings a PostgreSQL schema or a Redis namespace that is behind this
// build up to date (a process's --migrate; a PostgreSQL URL's migrate=true
// does the same). A SQLite file migrates as it opens either way.
func OpenMigrating(ctx context.Context, rawURL string, log *slog.Logger) (backend.Store, error) {
	return open(ctx, rawURL, log, false, true)
}

// OpenExisting opens the store a URL names only if it exists and is
// migrated: it never creates or migrates one. Commands that only read,
// and commands acting on a store they do not own, open stores so.
func OpenExisting(ctx context.Context, rawURL string, log *slog.Logger) (backend.Store, error) {
	return open(ctx, rawURL, log, true, false)
}

func open(ctx context.Context, rawURL string, log *slog.Logger, mustExist, migrate bool) (backend.Store, error) {
	t, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	switch t.Backend {
	case "sqlite":
		s, err := sqlite.Open(ctx, t.Path, sqlite.Options{Logger: log, MustExist: mustExist})
		if err != nil {
			return nil, err
		}
		return s, nil
	case "postgres":
		// A process opening a PostgreSQL store migrates it only when
		// told (--migrate, migrate=true in the URL, or `sluice
		// migrate`): see postgres.Options.
		s, err := postgres.Open(ctx, rawURL, postgres.Options{Logger: log, MustExist: mustExist, Migrate: migrate})
		if err != nil {
			return nil, err
		}
		return s, nil
	case "redis":
		// A namespace is created when empty (unless mustExist); one at
		// an older schema version is refused, naming sluice migrate,
		// unless the process was told to migrate.
		s, err := redis.Open(ctx, rawURL, redis.Options{Logger: log, MustExist: mustExist, Migrate: migrate})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("store %s: %s backend not built yet: %w", redact.URL(rawURL), t.Backend, engine.ErrUnsupported)
}
