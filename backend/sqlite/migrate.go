package sqlite

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded migrations, oldest first. A file is named
// NNNN_description.sql; NNNN is its version.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("sqlite: migration %s: name is not NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("sqlite: migration %s: bad version", name)
		}
		b, err := fs.ReadFile(migrationFS, "migrations/"+name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("sqlite: migrations %s and %s share a version", out[i-1].name, out[i].name)
		}
	}
	return out, nil
}

// SchemaVersion is the newest migration this build knows.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// Migrate applies the embedded migrations the file lacks, all in one write
// transaction; it is idempotent and safe to run from several processes at
// once. Open runs it.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var applied []string
	regrouped := 0
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			applied_at INTEGER NOT NULL
		)`); err != nil {
			return fmt.Errorf("sqlite: migrate: %w", err)
		}
		have := map[int]bool{}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("sqlite: migrate: %w", err)
		}
		newest := 0
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return fmt.Errorf("sqlite: migrate: %w", err)
			}
			have[v] = true
			newest = max(newest, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlite: migrate: %w", err)
		}
		if len(ms) > 0 && newest > ms[len(ms)-1].version {
			return fmt.Errorf("sqlite: migrate: the file's schema version %d is newer than this build's %d", newest, ms[len(ms)-1].version)
		}
		for _, m := range ms {
			if have[m.version] {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
			}
			if m.version == renormalizeVersion {
				if regrouped, err = renormalizeErrorPatterns(ctx, tx); err != nil {
					return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.version, now.UnixNano()); err != nil {
				return fmt.Errorf("sqlite: migration %s: %w", m.name, err)
			}
			applied = append(applied, m.name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range applied {
		s.log.Info("sqlite: migration applied", "file", s.path, "migration", name)
	}
	if regrouped > 0 {
		s.log.Info("sqlite: error patterns normalised again", "file", s.path, "jobs", regrouped)
	}
	return nil
}
