package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
)

// TestUniqueIndexMatchesStateBits holds the partial index of migration
// 0009, which spells each state's bit as a literal, to
// sluicetype.UniqueStateBit and to sqlUniqueHolds, which the holder
// lookups use.
func TestUniqueIndexMatchesStateBits(t *testing.T) {
	b, err := os.ReadFile("migrations/0009_unique.sql")
	if err != nil {
		t.Fatal(err)
	}
	sql := strings.Join(strings.Fields(string(b)), " ")
	for _, st := range sluicetype.AllStates {
		when := fmt.Sprintf("WHEN '%s' THEN %d", st, sluicetype.UniqueStateBit(st))
		if !strings.Contains(sql, when) {
			t.Errorf("migration 0009 lacks %q", when)
		}
		if !strings.Contains(sqlUniqueHolds, when) {
			t.Errorf("sqlUniqueHolds lacks %q", when)
		}
	}
}

// TestUniqueLookupsUseTheIndex: the holder lookup and the unique: filter
// read jobs_unique_key, not the table.
func TestUniqueLookupsUseTheIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := &where{}
	if err := w.addFilter(&sluicetype.Filter{UniqueKey: "k"}); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{
		"holder":     sqlUniqueHolder,
		"holder of":  sqlUniqueHolderOf,
		"the filter": "SELECT id FROM jobs WHERE " + w.sql(),
	} {
		rows, err := db.Query("EXPLAIN QUERY PLAN "+q, append([]any{"k"}, w.args[1:]...)...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if !strings.Contains(strings.Join(plan, "; "), "jobs_unique_key") {
			t.Errorf("%s does not read jobs_unique_key: %s", name, strings.Join(plan, "; "))
		}
	}
}
