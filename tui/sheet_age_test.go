package tui

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// TestSheetAgesRefresh: the sheet's relative times follow the clock on
// the age tick, as the list's ages do (the sheet's rendered lines were
// cached until something else invalidated them: "5m ago" stayed).
func TestSheetAgesRefresh(t *testing.T) {
	f := setup(t, false)
	var later atomic.Int64
	o := testOptions()
	o.Now = func() time.Time { return time.Now().Add(5*time.Minute + time.Duration(later.Load())) }
	s := start(t, f.eng, o)
	s.waitFor("evil-0001")
	s.keys("<enter>")
	screen := s.waitFor(" ago)")
	if strings.Contains(screen, "3d ago)") {
		t.Fatalf("the sheet says 3d ago before the clock moved:\n%s", screen)
	}
	later.Store(int64(72 * time.Hour))
	s.tm.Send(ageTickMsg{})
	screen = s.waitFor("3d ago)")
	if strings.Contains(ansi.Strip(screen), "(5m ago)") {
		t.Fatalf("a stamp of the sheet kept its old age:\n%s", screen)
	}
}
