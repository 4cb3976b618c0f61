package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// queuesScreen is the Queues screen: jobs per state of each queue, and
// pausing one.
type queuesScreen struct {
	listScreen
	data   []engine.QueueInfo
	limits []engine.Limit
}

// SetSize sets the size the queues are drawn at, the header included.
func (s *queuesScreen) SetSize(w, h int) { s.listScreen.SetSize(w, h) }

func (s *queuesScreen) len() int { return len(s.data) }

func (s *queuesScreen) key(i int) string {
	if i < 0 || i >= len(s.data) {
		return ""
	}
	return s.data[i].Name
}

// Update takes the queues read and the keys on the cursor's row: enter
// shows its jobs, pause asks before pausing or resuming it.
func (s *queuesScreen) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case queuesMsg:
		s.data, s.limits = msg.queues, msg.limits
	case tea.KeyPressMsg:
		q := s.data[s.cursor]
		switch {
		case m.km.Matches(msg, keymap.Open):
			return m.toJobs(func(v *jobsView) {
				f := engine.Filter{Queues: []string{q.Name}}
				v.setFilter(f.String(), f)
			})
		case m.km.Matches(msg, keymap.Pause):
			verb := "Pause"
			if q.Paused {
				verb = "Resume"
			}
			name, pause := q.Name, !q.Paused
			what := "workers stop claiming from a paused queue; nothing else changes"
			if q.Paused {
				what = "workers claim from the queue again; its waiting jobs run"
			}
			m.dlg.confirm = &confirmDialog{
				title: fmt.Sprintf("%s queue %s?", verb, termtext.Line(q.Name)),
				lines: []string{m.theme.Muted.Render(what)},
				yes:   func() tea.Cmd { return m.pauseQueue(name, pause) },
			}
		}
	}
	return nil
}

// View draws the queues, and the cursor's queue's retention below them
// (no column is wide enough for it beside the counts).
func (s *queuesScreen) View(m *Model) []string {
	t, w, h := m.theme, s.w, s.h
	queueStates := []engine.State{engine.StateAvailable, engine.StateRunning, engine.StateRetryable, engine.StateScheduled,
		engine.StateArchived, engine.StateQuarantined, engine.StateUndecodable, engine.StateCompleted, engine.StateCancelled}
	cols := []colSpec{{"QUEUE", 16, false}, {"STATUS", 8, false}}
	for _, st := range queueStates {
		cols = append(cols, colSpec{strings.ToUpper(shortState[st]), 9, true})
	}
	cols = append(cols, colSpec{"", 0, false})
	row := func(i int) []cell {
		q := s.data[i]
		status, st := "active", t.OKText
		if q.Paused {
			status, st = "paused", t.WarnText
		}
		cells := []cell{{termtext.Line(q.Name), t.Row}, {status, st}}
		for _, state := range queueStates {
			n := q.Counts[state]
			cs := t.Subtle
			if n > 0 {
				cs = t.State(string(state))
			}
			cells = append(cells, cell{commas(n), cs})
		}
		return cells
	}
	n := len(s.data)
	lines := s.render(t, cols, n, row, w, h, "no queues yet")
	if n == 0 || !s.loaded {
		return lines
	}
	q := s.data[s.cursor]
	var r map[engine.State]time.Duration
	if meta := m.sess.meta; meta != nil && meta.Retention != nil {
		r = meta.Retention.Of(q.Name)
	}
	info := clip("  "+t.Muted.Render("retention of "+termtext.Line(q.Name)+": "+retentionSummary(r)+
		queueLimitNote(s.limits, q.Name)), w)
	if pos := 2 + min(n, h-1); pos < h {
		lines[pos] = info
		return lines
	}
	return append(s.render(t, cols, n, row, w, max(h-2, 1), "no queues yet"), "", info)
}
