package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// MigrationStatus is where a file's schema stands against the migrations
// built into this binary.
type MigrationStatus struct {
	// Exists is false when there is no file yet (Open would create it).
	Exists bool
	// Version is the newest migration applied to the file; 0 for none.
	Version int
	// Latest is the newest migration this build knows (SchemaVersion).
	Latest int
	// Pending names the migrations the file lacks, oldest first, as
	// 0002_control.sql.
	Pending []string
}

// Status reads the migrations applied to the SQLite file at dsn (a path or
// a sqlite:// URL) without changing it or creating it.
func Status(ctx context.Context, dsn string) (*MigrationStatus, error) {
	path := dsn
	if strings.HasPrefix(dsn, "sqlite:") {
		p, err := ParseURL(dsn)
		if err != nil {
			return nil, err
		}
		path = p
	}
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	st := &MigrationStatus{}
	if len(ms) > 0 {
		st.Latest = ms[len(ms)-1].version
	}
	have := map[int]bool{}
	switch _, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("sqlite: status %s: %w", path, err)
	default:
		st.Exists = true
		if have, err = appliedMigrations(ctx, path); err != nil {
			return nil, err
		}
	}
	for v := range have {
		st.Version = max(st.Version, v)
	}
	for _, m := range ms {
		if !have[m.version] {
			st.Pending = append(st.Pending, m.name)
		}
	}
	return st, nil
}

// appliedMigrations reads schema_migrations through a query-only
// connection.
func appliedMigrations(ctx context.Context, path string) (map[int]bool, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return nil, fmt.Errorf("sqlite: status %s: %w", path, err)
	}
	defer db.Close()
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("sqlite: status %s: %w", path, err)
	}
	have := map[int]bool{}
	if !exists {
		return have, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: status %s: %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("sqlite: status %s: %w", path, err)
		}
		have[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: status %s: %w", path, err)
	}
	return have, nil
}
