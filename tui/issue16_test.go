package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/sluicehq/sluice/engine"
)

// Issue 16: the console tells the truth at every step. These tests drive
// the model directly with the answers its commands would bring, so a
// list can be re-sorted under the cursor at a chosen moment.

func stillModel(t *testing.T, w, h int) *Model {
	t.Helper()
	opts := testOptions()
	opts.NoSubscribe = true
	m := New(nil, opts)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

func plainScreen(m *Model) string { return ansi.Strip(m.Render()) }

func group(queue, kind, pattern string, n int64) engine.ErrorGroup {
	return engine.ErrorGroup{Queue: queue, Kind: kind, Pattern: pattern, Count: n,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{queue}, Kinds: []string{kind}, ErrorPattern: pattern}}
}

// loadGroups feeds the errors screen an answer, as its load would.
func loadGroups(m *Model, gs ...engine.ErrorGroup) {
	m.loadScreen(scrErrors)
	m.handleMsg(groupsMsg{seq: m.screenSeq, groups: gs})
}

var (
	gRefused  = group("billing", "invoice.generate", "dial tcp <addr>: connection refused", 4180)
	gCurrency = group("billing", "invoice.generate", `invalid currency "<str>"`, 31)
	gTemplate = group("email", "receipt.send", "template not found", 2)
)

// TestListCursorFollowsItem: the groups re-sort live while a bulk preview
// is open for the second one; the cursor stays on that group, the preview
// names it, and y acts on it.
func TestListCursorFollowsItem(t *testing.T) {
	m := stillModel(t, goldenW, goldenH)
	m.screen = scrErrors
	loadGroups(m, gRefused, gCurrency, gTemplate)
	press(m, "j")
	if g := m.groupsData[m.groups.cursor]; g.Pattern != gCurrency.Pattern {
		t.Fatalf("cursor on %q", g.Pattern)
	}
	m.handleKey(keyMsg("b"))
	if m.bulk == nil {
		t.Fatal("b opened no preview")
	}
	m.handleMsg(bulkPreviewMsg{seq: m.bulk.seq, res: &engine.BulkResult{Matched: 31}})
	// The currency group grows past the outage's: it is row 1 now.
	big := gCurrency
	big.Count = 5000
	loadGroups(m, big, gRefused, gTemplate)
	if g := m.groupsData[m.groups.cursor]; g.Pattern != gCurrency.Pattern {
		t.Fatalf("after the re-sort the cursor is on %q, want the currency group", g.Pattern)
	}
	screen := plainScreen(m)
	if !strings.Contains(screen, `invalid currency "<str>"`) || !strings.Contains(screen, "retry 31 jobs") {
		t.Fatalf("the preview does not name its group:\n%s", screen)
	}
	golden.RequireEqual(t, normalize(screen))
	if got := m.bulk.selector.ErrorPattern; got != gCurrency.Pattern {
		t.Fatalf("y would act on %q", got)
	}
	m.handleKey(keyMsg("<esc>"))
	// Other lists keep their item too: queues, quarantine, operations.
	m.screen = scrQueues
	m.loadScreen(scrQueues)
	m.handleMsg(queuesMsg{seq: m.screenSeq, queues: []engine.QueueInfo{{Name: "billing"}, {Name: "email"}, {Name: "reports"}}})
	press(m, "j")
	press(m, "j")
	m.loadScreen(scrQueues)
	m.handleMsg(queuesMsg{seq: m.screenSeq, queues: []engine.QueueInfo{{Name: "audit"}, {Name: "reports"}, {Name: "billing"}, {Name: "email"}}})
	if q := m.queuesData[m.queues.cursor].Name; q != "reports" {
		t.Fatalf("queues cursor on %q, want reports", q)
	}
	m.handleKey(keyMsg("P"))
	if m.dialog == nil || !strings.Contains(m.dialog.title, "reports") {
		t.Fatalf("the pause dialog does not name reports: %+v", m.dialog)
	}
}
