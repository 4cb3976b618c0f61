package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestScratchUpdates(t *testing.T) {
	raw, err := os.ReadFile("/tmp/fixture-copy.db")
	if err != nil {
		t.Skip(err)
	}
	full := "state = 'available', max_attempts = max(max_attempts, attempt + 1), scheduled_at = 5, finalized_at = NULL, terminal_reason = '', state_changed_at = 5, version = version + 1"
	variants := []struct{ name, ddl, set string }{
		{"base", "", full},
		{"mmap", "PRAGMA mmap_size=268435456", full},
		{"cache128", "PRAGMA cache_size=-131072", full},
		{"base2", "", full},
		{"mmap2", "PRAGMA mmap_size=268435456", full},
		{"cache128-2", "PRAGMA cache_size=-131072", full},
	}
	for _, v := range variants {
		var ds []time.Duration
		for rep := range 4 {
			path := filepath.Join(t.TempDir(), "f.db")
			os.WriteFile(path, raw, 0o600)
			db, _ := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-32000)")
			db.SetMaxOpenConns(1)
			if v.ddl != "" {
				if _, err := db.Exec(v.ddl); err != nil {
					t.Fatal(err)
				}
			}
			var n int
			db.QueryRow("SELECT count(*) FROM jobs WHERE length(payload) > 0").Scan(&n)
			_ = rep
			for r := 1000; r < 96000; r += 4000 {
				tx, _ := db.Begin()
				st := time.Now()
				if _, err := tx.Exec("UPDATE OR FAIL jobs SET "+v.set+" WHERE rowid IN (SELECT rowid FROM jobs WHERE rowid > ? ORDER BY rowid LIMIT 1000)", r); err != nil {
					t.Fatal(err)
				}
				ds = append(ds, time.Since(st))
				tx.Commit()
			}
			db.Close()
		}
		slices.Sort(ds)
		t.Logf("%-20s p10 %v median %v min %v n=%d", v.name, ds[len(ds)/10], ds[len(ds)/2], ds[0], len(ds))
	}
}
