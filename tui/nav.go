package tui

import (
	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// Navigation is a stack: going from one screen to another (enter on a
// list row, a : command) pushes where the operator was — the screen, the
// item under the cursor, the job filter and the sheet — and esc pops it,
// so it returns to the screen and the row it came from.

type navFrame struct {
	screen screen
	key    string // the item under the cursor: a job id or listComponent.key
	tab    int
	query  string
	filter engine.Filter
	sheet  bool
}

// maxNav bounds the stack: far enough back for any walk, never growing
// without end.
const maxNav = 32

// pushNav remembers where the operator is, before going elsewhere.
func (m *Model) pushNav() {
	v := &m.jobs
	f := navFrame{screen: m.screen, tab: v.tab, query: v.query, filter: v.filter, sheet: m.sheet.open}
	if m.screen == scrJobs {
		if r := v.current(); r != nil {
			f.key = r.job.ID
		}
	} else if c := m.listOf(m.screen); c != nil {
		f.key = c.key(c.list().cursor)
	}
	m.nav = append(m.nav, f)
	if len(m.nav) > maxNav {
		m.nav = m.nav[len(m.nav)-maxNav:]
	}
}

// popNav goes back to the last place pushed.
func (m *Model) popNav() tea.Cmd {
	f := m.nav[len(m.nav)-1]
	m.nav = m.nav[:len(m.nav)-1]
	v := &m.jobs
	v.tab, v.query, v.filter, v.queryErr = f.tab, f.query, f.filter, ""
	v.selectAll = false
	m.sheet.open = f.sheet
	if f.screen == scrJobs {
		v.seek = f.key
		return tea.Batch(m.switchScreen(scrJobs), m.loadCounts())
	}
	if c := m.listOf(f.screen); c != nil {
		follow(c, f.key)
	}
	return m.switchScreen(f.screen)
}

// groupScope describes what narrows the error groups: the job filter's
// queues and kinds ("" when nothing does).
func (m *Model) groupScope() string {
	return describeFilter(m.jobs.effectiveFilter())
}
