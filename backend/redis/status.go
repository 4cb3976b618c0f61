package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redact"
)

// MigrationStatus is where a namespace's schema stands, for `sluice
// migrate` (it mirrors the SQLite store's).
type MigrationStatus struct {
	// Exists reports that the namespace has a schema key.
	Exists bool
	// Version is the namespace's schema version (0 when it does not exist).
	Version int
	// Latest is this build's.
	Latest int
	// Pending names the steps Migrate would take.
	Pending []string
}

// Status reads a namespace's schema version without changing or creating
// anything.
func Status(ctx context.Context, rawURL string) (*MigrationStatus, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var c goredis.UniversalClient
	if t.Cluster {
		c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: t.Addrs})
	} else {
		c = goredis.NewClient(t.Options)
	}
	defer c.Close()
	st := &MigrationStatus{Latest: SchemaVersion}
	v, err := c.Get(ctx, "{"+t.Namespace+"}:schema").Result()
	switch {
	case errors.Is(err, goredis.Nil):
	case err != nil:
		return nil, fmt.Errorf("redis: status %s: %w", redact.URL(rawURL), err)
	default:
		st.Exists = true
		if st.Version, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("redis: status %s: schema version %q is not a number", redact.URL(rawURL), v)
		}
	}
	for n := st.Version + 1; n <= SchemaVersion; n++ {
		st.Pending = append(st.Pending, fmt.Sprintf("%04d_layout", n))
	}
	return st, nil
}
