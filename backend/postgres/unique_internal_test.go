package postgres

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sluicetype"
)

// TestUniqueIndexMatchesStateBits holds the index of migration 0011,
// which spells each state's bit as a literal, to sluicetype.UniqueStateBit
// and to uniqueHoldsSQL, which the holder lookups use.
func TestUniqueIndexMatchesStateBits(t *testing.T) {
	b, err := os.ReadFile("migrations/0011_unique.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	sql := strings.Join(strings.Fields(string(b)), " ")
	holds := uniqueHoldsSQL("")
	for _, st := range sluicetype.AllStates {
		when := fmt.Sprintf("WHEN '%s' THEN %d", st, sluicetype.UniqueStateBit(st))
		if !strings.Contains(sql, when) {
			t.Errorf("migration 0011 lacks %q", when)
		}
		if !strings.Contains(holds, when) {
			t.Errorf("uniqueHoldsSQL lacks %q", when)
		}
	}
}
