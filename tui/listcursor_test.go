package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/sluicehq/sluice/engine"
)

// TestListCursorFollowsItem: the groups re-sort live while a bulk preview
// is open for the second one; the cursor stays on that group, the preview
// names it, and y acts on it.
func TestListCursorFollowsItem(t *testing.T) {
	m := stillModel(t, goldenW, goldenH)
	m.screen = scrErrors
	loadGroups(m, gRefused, gCurrency, gTemplate)
	press(m, "j")
	if g := m.lists.groups.data[m.lists.groups.cursor]; g.Pattern != gCurrency.Pattern {
		t.Fatalf("cursor on %q", g.Pattern)
	}
	m.handleKey(keyMsg("b"))
	if m.dlg.bulk == nil {
		t.Fatal("b opened no preview")
	}
	m.handleMsg(bulkPreviewMsg{seq: m.dlg.bulk.seq, res: &engine.BulkResult{Matched: 31}})
	// The currency group grows past the outage's: it is row 1 now.
	big := gCurrency
	big.Count = 5000
	loadGroups(m, big, gRefused, gTemplate)
	if g := m.lists.groups.data[m.lists.groups.cursor]; g.Pattern != gCurrency.Pattern {
		t.Fatalf("after the re-sort the cursor is on %q, want the currency group", g.Pattern)
	}
	screen := plainScreen(m)
	if !strings.Contains(screen, `invalid currency "<str>"`) || !strings.Contains(screen, "retry 31 jobs") {
		t.Fatalf("the preview does not name its group:\n%s", screen)
	}
	golden.RequireEqual(t, normalize(screen))
	if got := m.dlg.bulk.selector.ErrorPattern; got != gCurrency.Pattern {
		t.Fatalf("y would act on %q", got)
	}
	m.handleKey(keyMsg("<esc>"))
	// Other lists keep their item too: queues, quarantine, operations.
	m.screen = scrQueues
	m.loadScreen(scrQueues)
	m.handleMsg(queuesMsg{seq: m.loads.screenSeq, queues: []engine.QueueInfo{{Name: "billing"}, {Name: "email"}, {Name: "reports"}}})
	press(m, "j")
	press(m, "j")
	m.loadScreen(scrQueues)
	m.handleMsg(queuesMsg{seq: m.loads.screenSeq, queues: []engine.QueueInfo{{Name: "audit"}, {Name: "reports"}, {Name: "billing"}, {Name: "email"}}})
	if q := m.lists.queues.data[m.lists.queues.cursor].Name; q != "reports" {
		t.Fatalf("queues cursor on %q, want reports", q)
	}
	m.handleKey(keyMsg("P"))
	if m.dlg.confirm == nil || !strings.Contains(m.dlg.confirm.title, "reports") {
		t.Fatalf("the pause dialog does not name reports: %+v", m.dlg.confirm)
	}
}

// TestRowNumbers: a job that completed on its
// sixth run reads 6/6 with no last error; one skipped on its first run
// reads 1/3; one that spent its attempts reads them all.
func TestRowNumbers(t *testing.T) {
	t.Parallel()
	at := time.Now()
	fails := []engine.AttemptError{{Attempt: 5, Message: "boom"}}
	for _, c := range []struct {
		name    string
		job     engine.Job
		att     string
		lastErr string
	}{
		{"completed on the sixth run", engine.Job{ID: "a", State: engine.StateCompleted, Attempt: 5, MaxAttempts: 6, AttemptedAt: &at, Errors: fails}, "6/6", ""},
		{"skipped on the first run", engine.Job{ID: "b", State: engine.StateArchived, TerminalReason: engine.ReasonSkipped, MaxAttempts: 3, AttemptedAt: &at}, "1/3", "skipped"},
		{"attempts exhausted", engine.Job{ID: "c", State: engine.StateArchived, TerminalReason: engine.ReasonAttemptsExhausted, Attempt: 3, MaxAttempts: 3, AttemptedAt: &at, Errors: fails}, "3/3", "boom"},
		{"running its second run", engine.Job{ID: "d", State: engine.StateRunning, Attempt: 1, MaxAttempts: 3, AttemptedAt: &at, Errors: fails}, "2/3", "boom"},
		{"past its deadline before it ran", engine.Job{ID: "e", State: engine.StateArchived, TerminalReason: engine.ReasonDeadlineExceeded, MaxAttempts: 3}, "0/3", "deadline passed before the job ran"},
	} {
		r := newRow(&c.job)
		if r.att != c.att || r.errMsg != c.lastErr {
			t.Errorf("%s: attempt %q, last error %q; want %q, %q", c.name, r.att, r.errMsg, c.att, c.lastErr)
		}
	}
}
