package tui

import (
	"context"
	"fmt"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// groupsScreen is the Error groups screen: the dead jobs of the jobs
// list's tab and filter, grouped by their error, each with its triage
// status; a bulk retry of one group, and the operator's verdicts on it
// (resolve, ignore, unignore).
type groupsScreen struct {
	listScreen
	data []engine.ErrorGroup
	// near is, per group, the groups of one job beside it
	// (engine.NearSingletons), computed once as the groups are read;
	// nil when hidden.
	near [][]int
	// hidden: the server sent the groups without their error text (a
	// viewer's, with errors hidden): nothing is said of near groups,
	// which is read from that text.
	hidden bool
	// scope is the filter data was asked for.
	scope string
	// ignored: the ignored groups are listed too (keymap.ShowIgnored).
	ignored bool
}

// groupVerdictMsg is the answer to a verdict on an error group.
type groupVerdictMsg struct {
	verb  string // resolve, ignore or unignore
	group engine.ErrorGroup
	err   error
}

// SetSize sets the size the groups are drawn at, the header included.
func (s *groupsScreen) SetSize(w, h int) { s.listScreen.SetSize(w, h) }

func (s *groupsScreen) len() int { return len(s.data) }

func (s *groupsScreen) key(i int) string {
	if i < 0 || i >= len(s.data) {
		return ""
	}
	return groupKey(s.data[i])
}

// groupKey tells error groups apart: queue, kind and pattern.
func groupKey(g engine.ErrorGroup) string { return g.Queue + "\x00" + g.Kind + "\x00" + g.Pattern }

// Update takes the groups read and the keys on the cursor's group: enter
// shows its jobs, bulk (or retry) opens a bulk retry of them.
func (s *groupsScreen) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case groupsMsg:
		s.set(msg.groups)
	case tea.KeyPressMsg:
		km := m.km
		g := s.data[s.cursor]
		switch {
		case km.Matches(msg, keymap.Open):
			return m.toJobs(func(v *jobsView) {
				v.setFilter(g.Selector.String(), g.Selector)
				// The tab shows the state; the filter line the rest.
				v.query = v.filter.String()
			})
		case km.Matches(msg, keymap.Bulk) || km.Matches(msg, keymap.Retry):
			return m.startBulk(engine.ActionRetry, g.Selector,
				fmt.Sprintf("error group %s / %s — %s", termtext.Line(g.Queue), termtext.Line(g.Kind), termtext.Line(g.Pattern)))
		case km.Matches(msg, keymap.ResolveGroup):
			// The note is typed on the command line: :resolve NOTE.
			return m.openInput(inputCommand, "resolve ")
		case km.Matches(msg, keymap.IgnoreGroup):
			if g.Status == engine.GroupIgnored {
				return m.groupVerdict("unignore", g, "")
			}
			return m.openInput(inputCommand, "ignore ")
		case km.Matches(msg, keymap.ShowIgnored):
			return s.toggleIgnored(m)
		}
	}
	return nil
}

// toggleIgnored lists the ignored groups too, or no longer, and reads the
// groups again: with none listed it is the way to the ignored ones.
func (s *groupsScreen) toggleIgnored(m *Model) tea.Cmd {
	s.ignored = !s.ignored
	what := "ignored error groups hidden"
	if s.ignored {
		what = "ignored error groups shown"
	}
	return tea.Batch(m.toast(what), m.loadScreen(scrErrors))
}

// verdictCommand is :resolve NOTE and :ignore NOTE: the verdict on the
// cursor's group of :errors, the rest of the line its note.
func (m *Model) verdictCommand(verb, note string) (tea.Cmd, error) {
	if m.sess.readOnly {
		return nil, fmt.Errorf("read-only: error groups cannot be %sd here", verb)
	}
	s := &m.lists.groups
	if m.screen != scrErrors || s.cursor < 0 || s.cursor >= len(s.data) {
		return nil, fmt.Errorf(":%s takes the group under the cursor of :errors", verb)
	}
	return m.groupVerdict(verb, s.data[s.cursor], note), nil
}

// groupVerdict resolves, ignores or un-ignores group g.
func (m *Model) groupVerdict(verb string, g engine.ErrorGroup, note string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		var err error
		switch verb {
		case "resolve":
			_, err = ctl.ResolveErrorGroup(c, engine.ErrorGroupResolveParams{ID: g.ID, Note: note})
		case "ignore":
			_, err = ctl.IgnoreErrorGroup(c, engine.ErrorGroupIgnoreParams{ID: g.ID, Note: note})
		default:
			_, err = ctl.UnignoreErrorGroup(c, engine.ErrorGroupUnignoreParams{ID: g.ID})
		}
		return groupVerdictMsg{verb: verb, group: g, err: err}
	}
}

// groupVerdictDone tells how a verdict went and reads the groups again.
func (m *Model) groupVerdictDone(msg groupVerdictMsg) tea.Cmd {
	what := fmt.Sprintf("error group %s / %s", termtext.Line(msg.group.Queue), termtext.Line(msg.group.Kind))
	if msg.err != nil {
		return m.toastErr(fmt.Sprintf("%s: %v", what, msg.err))
	}
	done := map[string]string{"resolve": "resolved", "ignore": "ignored", "unignore": "open again"}[msg.verb]
	return tea.Batch(m.toast(what+" "+done), m.loadScreen(scrErrors))
}

// statusMark is a group's status in one column, for a narrow screen:
// nothing for an open group, ! for a reopened one.
var statusMark = map[engine.GroupStatus]string{engine.GroupResolved: "✓", engine.GroupReopened: "!", engine.GroupIgnored: "-"}

// statusCell is a group's status in a word, and since when it came back
// for a reopened one ("reopened 5m"); with words false, its mark.
func (m *Model) statusCell(g engine.ErrorGroup, words bool) cell {
	st := g.Status
	if st == "" {
		st = engine.GroupOpen
	}
	text := string(st)
	if !words {
		text = statusMark[st]
	} else if st == engine.GroupReopened && g.ReopenedAt != nil {
		text += " " + age(m.now(), *g.ReopenedAt)
	}
	return cell{text, m.theme.GroupStatus(string(st))}
}

// triageLine says, for the cursor's group, who closed it, when, and their
// note; "" for an open group.
func (s *groupsScreen) triageLine(m *Model) string {
	i := s.cursor
	if i < 0 || i >= len(s.data) || s.data[i].TriagedAt == nil {
		return ""
	}
	g := s.data[i]
	verb := "resolved"
	if g.Status == engine.GroupIgnored {
		verb = "ignored"
	}
	line := fmt.Sprintf("%s by %s %s ago", verb, termtext.Line(g.TriagedBy), age(m.now(), *g.TriagedAt))
	if g.Status == engine.GroupReopened && g.ReopenedAt != nil {
		line = fmt.Sprintf("reopened: a job died %s ago, after it was %s", age(m.now(), *g.ReopenedAt), line)
	}
	if g.Note != "" {
		line += ": " + termtext.Line(g.Note)
	}
	return line
}

// rescope empties the screen when the groups asked for are of another
// scope than those it holds: they are not shown under the new scope's
// title, not even while its answer is on the way.
func (s *groupsScreen) rescope(scope string) {
	if scope != s.scope {
		s.set(nil)
		s.listScreen, s.scope = listScreen{w: s.w, h: s.h}, scope
	}
}

// set keeps the error groups read, and what is worked out from them once
// rather than per frame: which groups of one job sit beside each group.
// When their error text was hidden from this session, nothing is: near
// groups are told apart by that text.
func (s *groupsScreen) set(gs []engine.ErrorGroup) {
	s.data, s.near, s.hidden = gs, nil, false
	for _, g := range gs {
		if g.Pattern == engine.HiddenValue || g.Sample == engine.HiddenValue {
			s.hidden = true
		}
	}
	if !s.hidden {
		s.near = engine.NearSingletons(gs)
	}
}

// nearCount is how many groups of one sit beside group i ("" for none).
func (s *groupsScreen) nearCount(i int) string {
	if i < len(s.near) && len(s.near[i]) > 0 {
		return fmt.Sprint(len(s.near[i]))
	}
	return ""
}

// nearLine says, for the cursor's group, how many groups of one sit
// beside it and the first of them: most likely the same failure with an
// id the normaliser missed, which a retry of this group leaves dead.
// "" when there are none.
func (s *groupsScreen) nearLine() string {
	i := s.cursor
	if i < 0 || i >= len(s.near) || len(s.near[i]) == 0 {
		return ""
	}
	near := s.near[i]
	first := termtext.Line(s.data[near[0]].Pattern)
	if len(near) == 1 {
		return "1 near-identical group beside this one: " + first
	}
	return fmt.Sprintf("%d near-identical groups beside this one, the first: %s", len(near), first)
}

// View draws the groups, and below them what sits near the cursor's.
func (s *groupsScreen) View(m *Model) []string {
	t, now, w, h := m.theme, m.now(), s.w, s.h
	// The error is what tells the groups apart: below 100 columns FIRST
	// goes and QUEUE and KIND narrow, so that it keeps a third of the
	// line or more (at 60 columns it was cut to "…").
	first := w >= 100
	qw, kw := 12, 22
	if !first {
		qw, kw = min(12, max(8, w/8)), min(22, max(12, w/5))
	}
	// NEAR counts the groups of one beside each (nearLine), where there
	// is room and the error text is not hidden.
	near := first && !s.hidden
	// STATUS is a word (and the age of a reopening) where there is room,
	// else a mark (statusMark); the line under the list says it whole.
	status := colSpec{"STATUS", 11, false}
	if !first {
		status = colSpec{"", 1, false}
	}
	cols := []colSpec{{"QUEUE", qw, false}, {"KIND", kw, false}, status, {"JOBS", 8, true}}
	if near {
		cols = append(cols, colSpec{"NEAR", 4, true})
	}
	cols = append(cols, colSpec{"LAST", 5, true})
	if first {
		cols = append(cols, colSpec{"FIRST", 5, true})
	}
	cols = append(cols, colSpec{"ERROR", 0, false})
	row := func(i int) []cell {
		g := s.data[i]
		cs := []cell{
			{termtext.Line(g.Queue), t.Row}, {termtext.Line(g.Kind), t.Row}, m.statusCell(g, first), {commas(g.Count), t.State("archived")},
		}
		if near {
			cs = append(cs, cell{s.nearCount(i), t.WarnText})
		}
		cs = append(cs, cell{age(now, g.LastSeen), t.Cell})
		if first {
			cs = append(cs, cell{age(now, g.FirstSeen), t.Cell})
		}
		return append(cs, cell{termtext.Line(g.Pattern), t.ErrorText})
	}
	const empty = "no dead jobs — nothing to explain"
	n := len(s.data)
	var info []string
	if n > 0 && s.loaded {
		if line := s.triageLine(m); line != "" {
			info = append(info, clip("  "+t.Muted.Render(line), w))
		}
		if line := s.nearLine(); line != "" {
			info = append(info, clip("  "+t.WarnText.Render(line), w))
		}
	}
	if len(info) == 0 {
		return s.render(t, cols, n, row, w, h, empty)
	}
	// Below the rows, as a queue's retention is: in the first free
	// lines, or in lines taken from a list that fills the screen.
	if pos := 2 + min(n, h-1); pos+len(info) <= h {
		lines := s.render(t, cols, n, row, w, h, empty)
		copy(lines[pos:], info)
		return lines
	}
	return append(s.render(t, cols, n, row, w, max(h-1-len(info), 1), empty), append([]string{""}, info...)...)
}
