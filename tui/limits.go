package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
)

// Limits across processes in the console: :limit sets one after a
// confirmation that states the old value and the new; :queues shows the
// cursor's queue's limit; a held job's sheet names its limit.

// limitAskMsg is the limit :limit asks to set, with the value it has now
// (0: none).
type limitAskMsg struct {
	want engine.Limit
	old  int
	err  error
}

// limitSetMsg is what setting a limit did.
type limitSetMsg struct {
	l   engine.Limit
	old int
	err error
}

// limitCommand parses ":limit kind|queue NAME N" and reads the limit's
// value now, so that the confirmation can state it.
func (m *Model) limitCommand(arg string) (tea.Cmd, error) {
	f := strings.Fields(arg)
	if len(f) != 3 {
		return nil, fmt.Errorf("%w: :limit kind|queue NAME N (0 removes it)", engine.ErrInvalid)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: :limit: %q is not a whole number, 0 or more", engine.ErrInvalid, f[2])
	}
	want := engine.Limit{Scope: engine.LimitScope(f[0]), Name: f[1], Concurrency: n}
	if !want.Scope.Valid() {
		return nil, fmt.Errorf("%w: :limit: scope %q: want kind or queue", engine.ErrInvalid, f[0])
	}
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		ls, err := ctl.ListLimits(c)
		old := 0
		for _, l := range ls {
			if l.Scope == want.Scope && l.Name == want.Name {
				// A set writes the whole limit: the partition and the
				// rate it has stay as they are, only its count changes.
				old = l.Concurrency
				want.Key, want.Rate, want.RateWindow = l.Key, l.Rate, l.RateWindow
			}
		}
		return limitAskMsg{want: want, old: old, err: err}
	}, nil
}

// limitValue says a limit's value in words: "none" for 0.
func limitValue(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// askLimit opens the confirmation of a limit change: its old value and
// its new one, and what it does.
func (m *Model) askLimit(msg limitAskMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr(fmt.Sprintf("limits: %v", msg.err))
	}
	l, old := msg.want, msg.old
	what := fmt.Sprintf("at most %d run at once across every process; jobs past it wait available, uncharged", l.Concurrency)
	if l.Concurrency == 0 {
		what = "no limit: jobs run as each process's concurrency allows"
	}
	lines := []string{m.theme.Muted.Render(what)}
	if l.Rate > 0 {
		lines = append(lines, m.theme.Muted.Render(fmt.Sprintf("its rate stays: at most %d starts per %s", l.Rate, l.Window())))
	}
	m.dlg.confirm = &confirmDialog{
		title: fmt.Sprintf("Limit %s: %s → %s?", termtext.Line(l.String()), limitValue(old), limitValue(l.Concurrency)),
		lines: lines,
		yes:   func() tea.Cmd { return m.setLimit(l, old) },
	}
	return nil
}

func (m *Model) setLimit(l engine.Limit, old int) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return limitSetMsg{l: l, old: old, err: ctl.SetLimit(c, l)}
	}
}

// limitSet tells what the change did, and reloads the queues.
func (m *Model) limitSet(msg limitSetMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr(fmt.Sprintf("limit %s: %v", termtext.Line(msg.l.String()), msg.err))
	}
	return tea.Batch(m.toast(fmt.Sprintf("limit %s: %s → %s", termtext.Line(msg.l.String()), limitValue(msg.old),
		limitValue(msg.l.Concurrency))), m.loadScreen(scrQueues))
}

// queueLimitNote is the cursor's queue's limit for the queues screen's
// info line: " · limit 3/5 running"; "" when it has none.
func queueLimitNote(ls []engine.Limit, queue string) string {
	for _, l := range ls {
		if l.Scope == engine.LimitQueue && l.Name == queue && l.Concurrency > 0 {
			return fmt.Sprintf(" · limit %d/%d running", l.Running, l.Concurrency)
		}
	}
	return ""
}

// holdCell is the list row's note for an available job a limit holds
// back: "⏸ kind limit 5/5", "⏸ queue limit 2/2". The row's KIND and QUEUE
// columns name the limit, so the note leaves the name out and its usage
// fits at 80 columns; the sheet says it whole. A hold naming another kind
// or queue (none does today) is shown as the engine says it.
func holdCell(j *engine.Job) string {
	if j.State != engine.StateAvailable || j.HeldBy == "" {
		return ""
	}
	for _, own := range []engine.Limit{{Scope: engine.LimitKind, Name: j.Kind}, {Scope: engine.LimitQueue, Name: j.Queue}} {
		if rest, ok := strings.CutPrefix(j.HeldBy, "limit "+own.String()+" "); ok {
			return "⏸ " + string(own.Scope) + " limit " + termtext.Line(rest)
		}
	}
	return "⏸ " + termtext.Line(j.HeldBy)
}
