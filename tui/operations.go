package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// opsScreen is the Operations screen: bulk operations and their
// progress.
type opsScreen struct {
	listScreen
	data []*engine.Operation
}

// SetSize sets the size the operations are drawn at, the header included.
func (s *opsScreen) SetSize(w, h int) { s.listScreen.SetSize(w, h) }

func (s *opsScreen) len() int { return len(s.data) }

func (s *opsScreen) key(i int) string {
	if i < 0 || i >= len(s.data) {
		return ""
	}
	return s.data[i].ID
}

// Update takes the operations read and the keys on the cursor's row:
// enter watches a running one (or says how a finished one ended), cancel
// asks before cancelling it, resume before setting a halted canary run
// going again, copy copies its id.
func (s *opsScreen) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case operationsMsg:
		s.data = msg.ops
	case tea.KeyPressMsg:
		km := m.km
		op := s.data[s.cursor]
		switch {
		case km.Matches(msg, keymap.Open):
			if mark := engine.StartMark(op, m.now()); mark != "" {
				// Nothing to watch before its time.
				return m.toast(fmt.Sprintf("operation %s is %s: %s matched by its preview", termtext.Line(op.ID), mark, commas(op.Matched)))
			}
			if !opDone(op.Status) {
				return m.watchOperation(op)
			}
			text := fmt.Sprintf("operation %s %s: %s matched, %s ok, %s failed", termtext.Line(op.ID), op.Status,
				commas(op.Matched), commas(op.Succeeded), commas(op.Failed))
			if op.Status == engine.OperationHalted {
				return m.toastErr(text + " — " + termtext.Line(op.Error) + " · " + m.haltedHint())
			}
			return m.toast(text)
		case km.Matches(msg, keymap.Cancel):
			if opDone(op.Status) && op.Status != engine.OperationHalted {
				return m.toastErr("operation already " + string(op.Status))
			}
			id := op.ID
			title := fmt.Sprintf("Cancel operation %s (%s of %s processed)?", termtext.Line(op.ID), commas(op.Processed), commas(op.Matched))
			if mark := engine.StartMark(op, m.now()); mark != "" {
				title = fmt.Sprintf("Cancel operation %s, %s (%s matched)?", termtext.Line(op.ID), mark, commas(op.Matched))
			}
			m.dlg.confirm = &confirmDialog{
				title: title,
				yes:   func() tea.Cmd { return m.cancelOperation(id) },
			}
		case km.Matches(msg, keymap.ResumeOperation):
			if op.Status != engine.OperationHalted {
				return m.toastErr("only a halted canary run resumes; this one is " + string(op.Status))
			}
			id := op.ID
			m.dlg.confirm = &confirmDialog{
				title: fmt.Sprintf("Resume operation %s (%s)?", termtext.Line(op.ID), termtext.Line(op.Error)),
				yes:   func() tea.Cmd { return m.resumeOperation(id) },
			}
		case km.Matches(msg, keymap.Copy):
			return tea.Batch(tea.SetClipboard(op.ID), m.toast("copied "+termtext.Line(op.ID)))
		}
	}
	return nil
}

// View draws the operations with their progress.
func (s *opsScreen) View(m *Model) []string {
	t, now := m.theme, m.now()
	cols := []colSpec{{"OPERATION", 15, false}, {"ACTION", 7, false}, {"STATUS", 9, false}, {"PROGRESS", 16, false},
		{"MATCHED", 9, true}, {"DONE", 9, true}, {"OK", 9, true}, {"FAILED", 7, true}, {"BY", 10, false}, {"AGE", 5, true}, {"SELECTOR", 0, false}}
	return s.render(t, cols, len(s.data), func(i int) []cell {
		op := s.data[i]
		frac := 0.0
		if op.Matched > 0 {
			frac = float64(op.Processed) / float64(op.Matched)
		}
		st := t.Muted
		switch op.Status {
		case engine.OperationRunning, engine.OperationPending:
			st = t.InfoText
		case engine.OperationCompleted:
			st = t.OKText
		case engine.OperationFailed, engine.OperationHalted:
			st = t.ErrorText
		}
		status, progress := string(op.Status), cell{barText(frac, 11) + fmt.Sprintf(" %3.0f%%", min(frac, 1)*100), t.Accent}
		if mark := engine.StartMark(op, now); mark != "" {
			// Waiting for its start time: "scheduled", then the time
			// and the wait where its progress will be.
			status, st = "scheduled", t.Scheduled
			progress = cell{strings.TrimPrefix(mark, "scheduled for "), t.Scheduled}
		}
		// A canary run says its stage (or why it halted) before its
		// selector: that is what the operator watches.
		last := cell{describeFilter(op.Selector), t.Muted}
		if stage := engine.CanaryStageText(op); stage != "" && op.Status != engine.OperationCompleted && op.Status != engine.OperationCancelled {
			last = cell{termtext.Line(stage) + " · " + last.s, st}
		}
		return []cell{
			{fitMiddle(termtext.Line(op.ID), 15), t.Cell}, {string(op.Action), t.Row}, {status, st}, progress,
			{commas(op.Matched), t.Row}, {commas(op.Processed), t.Row}, {commas(op.Succeeded), t.OKText},
			{commas(op.Failed), t.ErrorText}, {termtext.Line(op.CreatedBy), t.Cell}, {age(now, op.CreatedAt), t.Cell},
			last,
		}
	}, s.w, s.h, "no bulk operations yet")
}
