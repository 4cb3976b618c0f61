package sqlite

import (
	"fmt"
	"os"
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
