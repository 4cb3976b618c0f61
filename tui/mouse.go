package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// Mouse support (Options.Mouse) on the jobs screen: the wheel moves the
// cursor, or scrolls the detail sheet under the pointer; a click picks a
// row, a click on the picked row opens it, and a click on a state tab
// switches to it. Everything else stays on the keyboard. It is off by
// default: a console that takes the mouse takes the terminal's own text
// selection away (most terminals still select with shift held).

// wheelStep is how many rows one wheel notch moves.
const wheelStep = 3

func (m *Model) handleMouse(msg tea.MouseMsg) tea.Cmd {
	if !m.opts.Mouse || m.top() != layerScreen || m.screen != scrJobs {
		return nil
	}
	m.jobs.touched = true
	ms := msg.Mouse()
	overSheet := m.sheet.open && ms.X >= m.width-m.sheetWidth()
	switch msg.(type) {
	case tea.MouseWheelMsg:
		d := wheelStep
		switch ms.Button {
		case tea.MouseWheelDown:
		case tea.MouseWheelUp:
			d = -d
		default:
			return nil
		}
		if overSheet {
			m.sheet.scroll = max(m.sheet.scroll+d, 0)
			return nil
		}
		return m.moveJobs(d)
	case tea.MouseClickMsg:
		if ms.Button != tea.MouseLeft {
			return nil
		}
		if ms.Y == m.tabsRow() { // the state tabs
			if i := m.tabAt(ms.X); i >= 0 {
				return m.selectTab(i)
			}
			return nil
		}
		row := ms.Y - m.bodyTop() - 1 // the table header is the body's first line
		v := &m.jobs
		if overSheet || row < 0 || row >= m.listHeight() || v.offset+row >= len(v.rows) {
			return nil
		}
		if i := v.offset + row; i != v.cursor {
			return m.moveJobs(i - v.cursor)
		}
		if !m.sheet.open {
			m.sheet.open, m.sheet.id = true, ""
			return m.sheetFollow()
		}
	}
	return nil
}

// bodyTop is the screen line the body starts on.
func (m *Model) bodyTop() int { return m.chromeHeight() - 1 }

// tabsRow is the line of the state tabs: under the title, and under the
// store's warning when there is one.
func (m *Model) tabsRow() int {
	if m.storeWarned() {
		return 1 + len(m.sess.meta.Warnings)
	}
	return 1
}

// tabAt is the state tab drawn at column x of the tabs line, or -1.
func (m *Model) tabAt(x int) int {
	line := ansi.Strip(m.tabsLine(m.width))
	from := 0
	for i, s := range engine.AllStates {
		at := -1
		for _, name := range []string{string(s) + " ", shortState[s] + " "} {
			if j := strings.Index(line[from:], name); j >= 0 {
				at = from + j
				break
			}
		}
		if at < 0 {
			return -1
		}
		end := len(line)
		if j := strings.Index(line[at:], "  "); j >= 0 {
			end = at + j
		}
		// The active tab's ▸ belongs to it.
		if start := ansi.StringWidth(line[:at]); x >= start-1 && x < ansi.StringWidth(line[:end]) {
			return i
		}
		from = end
	}
	return -1
}
