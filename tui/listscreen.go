package tui

import (
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
)

// The list screens: Quarantine, Operations, Queues, Error groups,
// Schedules, Limits and Audit, each a component (quarantine.go,
// operations.go, queues.go, groups.go, schedules.go, limits.go, audit.go)
// holding its rows. Their lists are short (at most a few hundred rows),
// rendered per frame for the visible rows only.

// listScreen is the cursor and load state every list screen has, and its
// size (the body's, header line included).
type listScreen struct {
	cursor, offset int
	loaded         bool
	err            error
	w, h           int
}

// SetSize sets the size the screen is drawn at.
func (ls *listScreen) SetSize(w, h int) { ls.w, ls.h = w, h }

func (ls *listScreen) list() *listScreen { return ls }

// listScreens are the list screens, one component each.
type listScreens struct {
	quar   quarScreen
	ops    opsScreen
	queues queuesScreen
	groups groupsScreen
	scheds schedulesScreen
	limits limitsScreen
	audit  auditScreen
}

// listComponent is one list screen.
type listComponent interface {
	// list is its cursor and load state.
	list() *listScreen
	// len is how many rows it holds.
	len() int
	// key names the item at row i: what the cursor stays on while the
	// list changes under it ("" when there is none).
	key(i int) string
	SetSize(w, h int)
	// Update takes the screen's keys (its actions, with a row under the
	// cursor) and its load's answer (already known to be the newest).
	Update(m *Model, msg tea.Msg) tea.Cmd
	View(m *Model) []string
}

// listOf is the component of list screen s (nil for the jobs screen).
func (m *Model) listOf(s screen) listComponent {
	switch s {
	case scrQuarantine:
		return &m.lists.quar
	case scrOperations:
		return &m.lists.ops
	case scrQueues:
		return &m.lists.queues
	case scrErrors:
		return &m.lists.groups
	case scrSchedules:
		return &m.lists.scheds
	case scrLimits:
		return &m.lists.limits
	case scrAudit:
		return &m.lists.audit
	}
	return nil
}

func (ls *listScreen) clamp(n, h int) {
	ls.cursor = min(max(ls.cursor, 0), max(n-1, 0))
	if h <= 0 {
		return
	}
	if ls.cursor < ls.offset {
		ls.offset = ls.cursor
	}
	if ls.cursor >= ls.offset+h {
		ls.offset = ls.cursor - h + 1
	}
	ls.offset = max(min(ls.offset, max(n-h, 0)), 0)
}

type colSpec struct {
	title string
	w     int // 0: takes what is left
	right bool
}

type cell struct {
	s  string // sanitized
	st lipgloss.Style
}

func (m *Model) current() (*listScreen, int) {
	if c := m.listOf(m.screen); c != nil {
		return c.list(), c.len()
	}
	return nil, 0
}

// render draws a header and the visible rows of a list screen, w×h.
func (ls *listScreen) render(t *themes.Theme, cols []colSpec, n int, row func(i int) []cell, w, h int, empty string) []string {
	fixed := 0
	for _, c := range cols {
		if c.w > 0 {
			fixed += c.w + 1
		}
	}
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = c.w
		if c.w == 0 {
			widths[i] = max(w-fixed-2, 0)
		}
	}
	line := func(cells []cell, plain, cursor bool) string {
		var b strings.Builder
		if cursor {
			b.WriteString("› ")
		} else {
			b.WriteString("  ")
		}
		for i, c := range cols {
			if widths[i] == 0 {
				continue
			}
			s := ""
			if i < len(cells) {
				s = cells[i].s
			}
			if c.right {
				s = fitRight(s, widths[i])
			} else {
				s = fit(s, widths[i])
			}
			if !plain && i < len(cells) {
				s = cells[i].st.Render(s)
			}
			b.WriteString(s)
			if i < len(cols)-1 {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	head := make([]cell, len(cols))
	for i, c := range cols {
		head[i] = cell{s: c.title}
	}
	out := []string{t.TableHeader.Render(fit(line(head, true, false), w))}
	rows := h - 1
	ls.clamp(n, rows)
	switch {
	case ls.err != nil && n == 0:
		out = append(out, t.ErrorText.Render(clip("  "+termtext.Line(ls.err.Error()), w)))
	case !ls.loaded:
		out = append(out, t.Muted.Render("  loading…"))
	case n == 0:
		out = append(out, t.Muted.Render("  "+empty))
	}
	for i := ls.offset; i < min(ls.offset+rows, n) && ls.loaded; i++ {
		cells := row(i)
		if i == ls.cursor {
			out = append(out, t.RowCursor.Render(fit(line(cells, true, true), w)))
		} else {
			out = append(out, clip(line(cells, false, false), w))
		}
	}
	return padLines(out, h)
}

func barText(frac float64, w int) string {
	full := int(min(max(frac, 0), 1)*float64(w) + 0.5)
	return strings.Repeat("█", full) + strings.Repeat("░", w-full)
}

// follow puts the cursor of list screen c back on the item named key
// after its rows changed; an item gone leaves the cursor on the row it
// had.
func follow(c listComponent, key string) {
	if key == "" {
		return
	}
	for i := range c.len() {
		if c.key(i) == key {
			c.list().cursor = i
			return
		}
	}
}

// maxReloadPause bounds the pause a live reload of a screen takes after
// a slow load (reloadScreen).
const maxReloadPause = 5 * time.Second

func (m *Model) screenLoaded(msg tea.Msg) tea.Cmd {
	var seq uint64
	var err error
	var s screen
	switch msg := msg.(type) {
	case quarantineMsg:
		seq, err, s = msg.seq, msg.err, scrQuarantine
	case operationsMsg:
		seq, err, s = msg.seq, msg.err, scrOperations
	case queuesMsg:
		seq, err, s = msg.seq, msg.err, scrQueues
	case groupsMsg:
		seq, err, s = msg.seq, msg.err, scrErrors
	case schedulesMsg:
		seq, err, s = msg.seq, msg.err, scrSchedules
	case limitsMsg:
		seq, err, s = msg.seq, msg.err, scrLimits
	case auditMsg:
		seq, err, s = msg.seq, msg.err, scrAudit
	}
	c := m.listOf(s)
	ls := c.list()
	if seq != m.loads.screenSeq {
		return nil
	}
	m.loads.screenBusy = false
	m.loads.screenNotBefore = m.now().Add(min(m.now().Sub(m.loads.screenSent), maxReloadPause))
	again := m.loads.screenAgain && err == nil && m.screen == s
	m.loads.screenAgain = false
	if err == nil {
		// The cursor stays on its item, not on its row number.
		key := c.key(ls.cursor)
		c.Update(m, msg)
		follow(c, key)
	}
	ls.err = err
	if err != nil {
		if isInputErr(err) {
			ls.loaded = true
			return nil
		}
		return m.failed(retryScreen, screenNames[m.screen], err)
	}
	ok := m.succeeded(retryScreen)
	ls.loaded = true
	if again {
		// Changes came in while this load ran: one more, paced.
		ok = tea.Batch(ok, m.reloadScreen())
	}
	if m.screen == scrOperations {
		return tea.Batch(ok, m.opsTick())
	}
	return ok
}

// listKey handles the keys of the list screens: the moves here, the rest
// in the screen's own Update.
func (m *Model) listKey(msg tea.KeyPressMsg) tea.Cmd {
	km := m.km
	c := m.listOf(m.screen)
	if c == nil {
		return nil
	}
	c.SetSize(m.width, m.bodyHeight())
	ls, n := c.list(), c.len()
	h := max(ls.h-1, 1)
	switch {
	case km.Matches(msg, keymap.Down):
		ls.cursor++
	case km.Matches(msg, keymap.Up):
		ls.cursor--
	case km.Matches(msg, keymap.PageDown):
		ls.cursor += h
	case km.Matches(msg, keymap.PageUp):
		ls.cursor -= h
	case km.Matches(msg, keymap.Top):
		ls.cursor = 0
	case km.Matches(msg, keymap.Bottom):
		ls.cursor = n - 1
	case km.Matches(msg, keymap.NextTab), km.Matches(msg, keymap.PrevTab):
		return m.switchScreen(scrJobs)
	case m.screen == scrErrors && km.Matches(msg, keymap.ShowIgnored):
		// Also with no group listed: it is the way to the ignored ones.
		return m.lists.groups.toggleIgnored(m)
	case n == 0:
		return nil
	default:
		return c.Update(m, msg)
	}
	ls.clamp(n, h)
	return nil
}
