package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// storeTarget is a parsed store URL.
type storeTarget struct {
	backend string // "sqlite", "postgres", "redis"
	path    string // sqlite: the file
}

// parseStoreURL names the backend of a store URL: sqlite://FILE (relative
// to the working directory), sqlite:///abs/path, a bare file path (SQLite),
// postgres:// or postgresql://, redis:// or rediss://.
func parseStoreURL(raw string) (storeTarget, error) {
	if strings.TrimSpace(raw) == "" {
		return storeTarget{}, fmt.Errorf("%w: empty store url (try sqlite://sluice.db)", engine.ErrInvalid)
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
			return storeTarget{}, err
		}
		return storeTarget{backend: "sqlite", path: p}, nil
	case "postgres", "postgresql":
		return storeTarget{backend: "postgres"}, nil
	case "redis", "rediss":
		return storeTarget{backend: "redis"}, nil
	}
	return storeTarget{}, fmt.Errorf("%w: store url %s: unknown scheme %q (want sqlite://, postgres:// or redis://)",
		engine.ErrInvalid, redactURL(raw), scheme)
}

// openStore opens the store a URL names. Only SQLite is built so far; the
// PostgreSQL and Redis URLs are recognised and refused with an error that
// wraps engine.ErrUnsupported.
func openStore(ctx context.Context, rawURL string) (engine.Store, error) {
	return openStoreLogged(ctx, rawURL, nil)
}

// openStoreLogged is openStore with the store's diagnostics sent to log
// (discarded when nil).
func openStoreLogged(ctx context.Context, rawURL string, log *slog.Logger) (engine.Store, error) {
	t, err := parseStoreURL(rawURL)
	if err != nil {
		return nil, err
	}
	switch t.backend {
	case "sqlite":
		s, err := sqlite.Open(ctx, t.path, sqlite.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("store %s: %s backend not built yet: %w", redactURL(rawURL), t.backend, engine.ErrUnsupported)
}

// redactURL hides a password in a URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
