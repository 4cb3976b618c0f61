package tui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// TestBulkRateInDialog: the preview takes a rate
// limit typed as digits, the operation runs at it (its record says so),
// the progress shows the limit with the measured rate and ETA, and the
// dialog stays on the result until the operator closes it.
func TestBulkRateInDialog(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("b")
	s.waitFor("retry 5 jobs", "no limit")
	s.keys("2", "0", "<backspace>")
	s.goldenAs("preview", s.waitFor("rate [", "2▏] jobs/s · takes about 3s"))
	s.keys("y")
	s.waitFor("Bulk retry — pending", "limit 2/s")
	f.startEngine(t)
	s.waitFor("Bulk retry — completed", "5 / 5 processed", "esc close")
	ops, err := f.eng.Operations(t.Context(), 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops.Operations) != 1 || ops.Operations[0].Rate != 2 {
		t.Fatalf("operations %+v, want one at 2 jobs/s", ops.Operations)
	}
	s.keys("<esc>")
	s.waitGone("Bulk retry — completed")
	// The toast with the result waited for the dialog.
	s.waitFor("bulk retry completed: 5 matched, 5 retried, 0 failed")
}

// TestBulkPreviewNeverHidesItsCount: on every size the console runs at,
// down to its smallest (60×12), the bulk preview that offers y shows the
// count it would act on and the rate field. At 60×12 a long error
// group's name used to fill the dialog and the line "retry 4,186 jobs"
// was among the hidden ones, with "y start" still offered (found walking
// the console).
func TestBulkPreviewNeverHidesItsCount(t *testing.T) {
	for _, size := range [][2]int{{60, 12}, {60, 15}, {70, 14}, {80, 24}} {
		w, h := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			m := loadedModel(t, 50, w, h)
			pattern := "dial tcp <addr>: connect: connection refused while sending invoice <n> to the billing gateway"
			sel := engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"},
				Kinds: []string{"invoice.generate"}, ErrorPattern: pattern}
			m.startBulk(engine.ActionRetry, sel, "error group billing / invoice.generate — "+pattern)
			if m.dlg.bulk == nil {
				t.Fatal("no bulk dialog")
			}
			m.handleMsg(bulkPreviewMsg{seq: m.dlg.bulk.seq, res: &engine.BulkResult{Matched: 4186, Sample: syntheticJobs(10, m.now())}})
			screen := plainScreen(m)
			for _, want := range []string{"Bulk retry — dry run", "retry 4,186 jobs", "rate [", "y start"} {
				if !strings.Contains(screen, want) {
					t.Fatalf("the preview does not show %q:\n%s", want, screen)
				}
			}
		})
	}
}

// TestBulkProgressStaleWhileUnreachable: when the operation's progress
// cannot be read, the dialog says so instead of a rate and an ETA; with
// the API down it went on showing "1.8/s · ETA 14s" for as long as it was
// away, while another server had moved the operation on (found attached).
func TestBulkProgressStaleWhileUnreachable(t *testing.T) {
	m := loadedModel(t, 5, 120, 30)
	started := m.now().Add(-10 * time.Second)
	op := &engine.Operation{ID: "op-1", Action: engine.ActionRetry, Status: engine.OperationRunning, Matched: 30, Processed: 5, StartedAt: &started}
	m.watchOperation(op)
	seq := m.dlg.bulk.seq
	m.handleMsg(opPollMsg{seq: seq, op: op, at: m.now().Add(-3 * time.Second)})
	more := *op
	more.Processed = 10
	m.handleMsg(opPollMsg{seq: seq, op: &more, at: m.now()})
	if s := plainScreen(m); !strings.Contains(s, "ETA") {
		t.Fatalf("no rate while polls work:\n%s", s)
	}
	m.handleMsg(opPollMsg{seq: seq, err: errors.Join(errors.New("dial tcp: connection refused"))})
	s := plainScreen(m)
	if strings.Contains(s, "ETA") || !strings.Contains(s, "progress unknown") || !strings.Contains(s, "running when last heard") {
		t.Fatalf("a failing poll still shows a live rate:\n%s", s)
	}
	m.handleMsg(opPollMsg{seq: seq, op: &more, at: m.now().Add(time.Second)})
	if s := plainScreen(m); strings.Contains(s, "progress unknown") {
		t.Fatalf("the dialog stays stale after a poll worked:\n%s", s)
	}
}
