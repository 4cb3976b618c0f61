package tui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/sluicehq/sluice/engine"
)

// TestSmallTerminalsKeepWhatMatters: at 80×24 and 60×15 every id in the
// list is whole, the bulk dialog shows its action line, and the help says
// it has more and scrolls to it.
func TestSmallTerminalsKeepWhatMatters(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {60, 15}} {
		w, h := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			m := loadedModel(t, 50, w, h)
			screen := plainScreen(m)
			shown := 0
			for _, r := range m.jobs.rows[:10] {
				if strings.Contains(screen, r.job.ID) {
					shown++
				}
			}
			if shown < min(10, m.listHeight()) {
				t.Fatalf("%d of the first ids shown whole:\n%s", shown, screen)
			}
			golden.RequireEqual(namedTB{t, t.Name() + "_list"}, normalize(screen))

			m.handleKey(keyMsg("b"))
			if m.dlg.bulk == nil {
				t.Fatal("no bulk dialog")
			}
			m.handleMsg(bulkPreviewMsg{seq: m.dlg.bulk.seq, res: &engine.BulkResult{Matched: 50, Sample: syntheticJobs(10, m.now())}})
			screen = plainScreen(m)
			if !strings.Contains(screen, "y start") {
				t.Fatalf("the bulk dialog's action line is off screen:\n%s", screen)
			}
			golden.RequireEqual(namedTB{t, t.Name() + "_bulk"}, normalize(screen))
			m.handleKey(keyMsg("<esc>"))

			m.handleKey(keyMsg("?"))
			screen = plainScreen(m)
			if !strings.Contains(screen, "more below") {
				t.Fatalf("the help drops rows without saying so:\n%s", screen)
			}
			for range 60 {
				m.handleKey(keyMsg("j"))
			}
			screen = plainScreen(m)
			if !strings.Contains(screen, "commands") || strings.Contains(screen, "more below") {
				t.Fatalf("the help does not scroll to its end:\n%s", screen)
			}
			golden.RequireEqual(namedTB{t, t.Name() + "_help_end"}, normalize(screen))
		})
	}
}
