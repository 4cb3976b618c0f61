package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// Limits across processes in the console: :limits lists them with their
// running jobs; :limit (or the set key there) sets one after a
// confirmation that states the old value and the new; :queues shows the
// cursor's queue's limit; a held job's row and sheet name its limit.

// limitsScreen is the Limits screen: every limit across processes, what
// it counts running now, its rate and partition; enter lists the jobs it
// covers that wait, and the set key starts :limit for the cursor's limit.
type limitsScreen struct {
	listScreen
	data []engine.Limit
}

type limitsMsg struct {
	seq    uint64
	limits []engine.Limit
	err    error
}

// SetSize sets the size the limits are drawn at, the header included.
func (s *limitsScreen) SetSize(w, h int) { s.listScreen.SetSize(w, h) }

func (s *limitsScreen) len() int { return len(s.data) }

// key names a limit by scope and name: at most one limit has both.
func (s *limitsScreen) key(i int) string {
	if i < 0 || i >= len(s.data) {
		return ""
	}
	return string(s.data[i].Scope) + " " + s.data[i].Name
}

// Update takes the limits read and the keys on the cursor's row.
func (s *limitsScreen) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case limitsMsg:
		s.data = msg.limits
	case tea.KeyPressMsg:
		l := s.data[s.cursor]
		switch {
		case m.km.Matches(msg, keymap.Open):
			// The jobs it covers that wait: those it may be holding.
			f := engine.Filter{Queues: []string{l.Name}}
			if l.Scope == engine.LimitKind {
				f = engine.Filter{Kinds: []string{l.Name}}
			}
			f.States = []engine.State{engine.StateAvailable}
			return m.toJobs(func(v *jobsView) { v.setFilter(f.String(), f) })
		case m.km.Matches(msg, keymap.SetLimit):
			// The number is typed on the command line; :limit then asks
			// with the old value and the new, as when typed whole.
			return m.openInput(inputCommand, "limit "+string(l.Scope)+" "+l.Name+" ")
		}
	}
	return nil
}

// limitRate is a limit's rate in a few characters: "10/1s", "600/1m",
// "-" for none. A window of whole hours, minutes or seconds is said in
// that unit (1m, not 1m0s); any other as Go writes it.
func limitRate(l engine.Limit) string {
	if l.Rate <= 0 {
		return "-"
	}
	w, per := l.Window(), ""
	switch {
	case w%time.Hour == 0:
		per = strconv.FormatInt(int64(w/time.Hour), 10) + "h"
	case w%time.Minute == 0:
		per = strconv.FormatInt(int64(w/time.Minute), 10) + "m"
	case w%time.Second == 0:
		per = strconv.FormatInt(int64(w/time.Second), 10) + "s"
	default:
		per = w.String()
	}
	return strconv.Itoa(l.Rate) + "/" + per
}

// View draws the limits.
func (s *limitsScreen) View(m *Model) []string {
	t, w, h := m.theme, s.w, s.h
	cols := []colSpec{{"SCOPE", 5, false}, {"NAME", 20, false}, {"LIMIT", 5, true}, {"RUNNING", 7, true},
		{"RATE", 8, true}, {"PER", 9, false}, {"SET", 0, false}}
	row := func(i int) []cell {
		l := s.data[i]
		limit, running := cell{limitValue(l.Concurrency), t.Row}, cell{commas(l.Running), t.Subtle}
		switch {
		case l.Concurrency > 0 && l.Key == "" && l.Running >= int64(l.Concurrency):
			// Full: what it covers waits.
			running.st = t.WarnText
		case l.Running > 0:
			running.st = t.State(string(engine.StateRunning))
		}
		if l.Concurrency == 0 {
			limit.st = t.Subtle
		}
		per := cell{"-", t.Subtle}
		if l.Key != "" {
			per = cell{termtext.Line(l.Key), t.Row}
		}
		set := ""
		if !l.UpdatedAt.IsZero() {
			set = ago(m.now(), l.UpdatedAt)
		}
		if l.UpdatedBy != "" {
			set += " by " + termtext.Line(l.UpdatedBy)
		}
		return []cell{{string(l.Scope), t.Muted}, {termtext.Line(l.Name), t.Row}, limit, running,
			{limitRate(l), t.Row}, per, {strings.TrimSpace(set), t.Muted}}
	}
	return s.render(t, cols, len(s.data), row, w, h, "no limits: :limit kind|queue NAME N sets one")
}

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
	if m.sess.readOnly {
		return nil, fmt.Errorf("read-only: limits cannot be set")
	}
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

// limitSet tells what the change did, and reloads the screen shown when
// it shows limits (the queues' note, the limits), so it shows the new
// value at once.
func (m *Model) limitSet(msg limitSetMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr(fmt.Sprintf("limit %s: %v", termtext.Line(msg.l.String()), msg.err))
	}
	cmd := m.toast(fmt.Sprintf("limit %s: %s → %s", termtext.Line(msg.l.String()), limitValue(msg.old),
		limitValue(msg.l.Concurrency)))
	if m.screen == scrQueues || m.screen == scrLimits {
		cmd = tea.Batch(cmd, m.loadScreen(m.screen))
	}
	return cmd
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
