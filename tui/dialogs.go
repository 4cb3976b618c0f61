package tui

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
)

// confirmDialog asks before an action: it states the count, and only the
// confirm key (y) says yes.
type confirmDialog struct {
	title string
	count int64
	lines []string
	// notes follow lines, each wrapped to the dialog's width when drawn
	// (lines are clipped): text whose meaning must survive a narrow
	// terminal. Each has its style.
	notes []dialogNote
	yes   func() tea.Cmd
	// edit, when set, is what the ReplayResult key does in this dialog
	// (a replay's preview: edit step N−1's result), named by editHint.
	edit     func() tea.Cmd
	editHint string
}

func (m *Model) dialogKey(msg tea.KeyPressMsg) tea.Cmd {
	d := m.dialog
	switch {
	case m.km.Matches(msg, keymap.Confirm):
		m.dialog = nil
		return d.yes()
	case d.edit != nil && m.km.Matches(msg, keymap.ReplayResult):
		m.dialog = nil
		return d.edit()
	case m.km.Matches(msg, keymap.Back), m.km.Matches(msg, keymap.Quit), msg.String() == "n":
		m.dialog = nil
		return m.toast("cancelled — nothing changed")
	}
	return nil
}

func (m *Model) confirmBox(w, h int) []string {
	d := m.dialog
	t := m.theme
	inner := w - 4
	var lines []string
	for _, l := range wrap(d.title, inner) {
		lines = append(lines, t.DialogHead.Render(l))
	}
	lines = append(lines, d.lines...)
	for _, n := range d.notes {
		for _, l := range wrap(n.text, inner) {
			lines = append(lines, n.style.Render(l))
		}
	}
	lines = append(lines, "", m.confirmHint())
	return m.box(keepEnds(lines, h-2, 1, 2), w)
}

// dialogNote is a paragraph of a confirmation, wrapped when drawn.
type dialogNote struct {
	text  string
	style lipgloss.Style
}

func (m *Model) confirmHint() string {
	t := m.theme
	edit := ""
	if d := m.dialog; d != nil && d.edit != nil && m.km.Enabled(keymap.ReplayResult) {
		edit = t.HelpKey.Render(m.km.B(keymap.ReplayResult).Help().Key) + t.HelpDesc.Render(" "+d.editHint+" · ")
	}
	return t.HelpKey.Render(m.km.B(keymap.Confirm).Help().Key) + t.HelpDesc.Render(" confirm · ") + edit +
		t.HelpKey.Render(m.km.B(keymap.Back).Help().Key) + t.HelpDesc.Render(" cancel")
}

// box draws lines in the dialog frame, w wide.
func (m *Model) box(lines []string, w int) []string {
	inner := max(w-4, 1)
	for i, l := range lines {
		lines[i] = fit(clip(l, inner), inner)
	}
	return strings.Split(m.theme.Dialog.Width(w).Render(strings.Join(lines, "\n")), "\n")
}

// Bulk: dry run → preview → confirm → progress → result.

const (
	bulkLoading bulkPhase = iota
	bulkPreview
	bulkStarting
	bulkRunning
	// bulkDone shows how the operation ended until the operator closes
	// it: a dialog that closed itself at the end would hide the result
	// of a short run before anyone saw it.
	bulkDone
	bulkFailed
)

// maxRateDigits bounds the rate typed in the preview (9,999,999 jobs/s).
const maxRateDigits = 7

// Lines of the bulk preview, each with the priority at which it goes when
// the terminal is short: what the operator confirms (the title, the
// action with its count, the rate, the confirm key) never goes, so a
// short terminal can never offer y over a count it hid. The line that
// says when the count was taken goes last of the rest.
const (
	keepAlways = iota
	keepSnap
	keepNotes
	keepContext
	keepSample
)

type pline struct {
	prio int
	s    string
	// group joins the lines of one wrapped text (0: none): they go
	// together, so no sentence is left cut in the middle.
	group int
}

// fitPrio fits lines into h rows: lines of the highest priority go
// first, the last of them first, and one line says how many went where
// the first of them was. That line takes a row too: once any go, the
// lines left fit h-1 rows.
func fitPrio(lines []pline, h int) []string {
	if len(lines) <= h {
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = l.s
		}
		return out
	}
	drop := map[int]bool{}
	left := len(lines)
	for prio := keepSample; prio > keepAlways && left+1 > h; prio-- {
		for i := len(lines) - 1; i >= 0 && left+1 > h; i-- {
			if lines[i].prio != prio || drop[i] {
				continue
			}
			for k := range lines {
				if k == i || (lines[i].group != 0 && lines[k].group == lines[i].group) {
					drop[k] = true
					left--
				}
			}
		}
	}
	// A group that went whole may have freed more rows than were
	// needed: the lines that went before it, most important first, come
	// back where they still fit.
	for prio := keepAlways + 1; prio < keepSample; prio++ {
		for i := range lines {
			if lines[i].prio != prio || !drop[i] {
				continue
			}
			var back []int
			for k := range lines {
				if k == i || (lines[i].group != 0 && lines[k].group == lines[i].group) {
					back = append(back, k)
				}
			}
			if left+len(back)+1 > h {
				continue
			}
			for _, k := range back {
				delete(drop, k)
				left++
			}
		}
	}
	out := make([]string, 0, h)
	noted := false
	for i, l := range lines {
		if !drop[i] {
			out = append(out, l.s)
		} else if !noted {
			noted = true
			out = append(out, fmt.Sprintf("… %d lines hidden: the terminal is short", len(drop)))
		}
	}
	return out
}

// wrapWords breaks s into lines of at most w cells at its spaces only (a
// time is not cut at its hyphens); a word wider than w is a line of its
// own, cut where the dialog cuts it.
func wrapWords(s string, w int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case wOf(line)+1+wOf(word) <= w:
			line += " " + word
		default:
			out = append(out, line)
			line = word
		}
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

// keepEnds fits lines into h: when they do not fit, the first head and
// the last tail lines stay (a dialog's title, its action line) and the
// middle is cut, saying how much.
func keepEnds(lines []string, h, head, tail int) []string {
	if len(lines) <= h || h < head+tail+1 {
		return lines
	}
	cut := len(lines) - (h - 1)
	mid := lines[head : len(lines)-tail]
	out := append([]string{}, lines[:head]...)
	out = append(out, mid[:len(mid)-cut]...)
	out = append(out, fmt.Sprintf("… %d lines hidden: the terminal is short", cut))
	return append(out, lines[len(lines)-tail:]...)
}

// bar draws a progress bar frac full, w cells wide.
func (m *Model) bar(frac float64, w int) string {
	frac = math.Max(0, math.Min(frac, 1))
	full := int(math.Round(frac * float64(w)))
	t := m.theme
	if t.Palette.Mono {
		return strings.Repeat("█", full) + strings.Repeat("░", w-full)
	}
	return t.Accent.Render(strings.Repeat("█", full)) + t.Subtle.Render(strings.Repeat("░", w-full))
}

// The input line: / filter and : command.

type inputKind int

const (
	inputFilter inputKind = iota
	inputCommand
)

type inputLine struct {
	kind inputKind
	ti   textinput.Model
	err  string
}

func (m *Model) openInput(kind inputKind, value string) tea.Cmd {
	ti := textinput.New()
	ti.Prompt = "/"
	ti.Placeholder = "state:archived queue:billing kind:invoice.generate error:\"timeout\" payload.customer:42"
	if kind == inputCommand {
		ti.Prompt = ":"
		ti.Placeholder = "archived · queue billing · theme light · quarantine · operations · queues · errors"
		ti.ShowSuggestions = true
		ti.SetSuggestions(commandNames())
	}
	ti.SetValue(value)
	ti.CursorEnd()
	ti.SetWidth(max(m.width-4, 10))
	in := &inputLine{kind: kind, ti: ti}
	in.restyle(m.theme)
	m.input = in
	return in.ti.Focus()
}

func (in *inputLine) restyle(t *themes.Theme) {
	st := textinput.DefaultStyles(t.Palette.Dark)
	st.Focused.Prompt = t.Filter
	st.Blurred.Prompt = t.Filter
	st.Focused.Placeholder = t.Subtle
	st.Cursor.Blink = false
	in.ti.SetStyles(st)
}

func (in *inputLine) update(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	in.ti, cmd = in.ti.Update(msg)
	if in.kind == inputFilter {
		in.err = ""
		if _, err := engine.ParseQuery(in.ti.Value()); err != nil {
			in.err = err.Error()
		}
	} else {
		in.err = ""
	}
	return cmd
}

func (m *Model) inputKey(msg tea.KeyPressMsg) tea.Cmd {
	in := m.input
	switch msg.String() {
	case "esc":
		m.input = nil
		return nil
	case "enter":
		val := strings.TrimSpace(in.ti.Value())
		if in.kind == inputCommand {
			cmd, err := m.runCommand(val)
			if err != nil {
				in.err = err.Error()
				return nil
			}
			m.input = nil
			return cmd
		}
		f, err := engine.ParseQuery(val)
		if err != nil {
			in.err = err.Error()
			return nil
		}
		m.input = nil
		m.jobs.setFilter(val, f)
		return tea.Batch(m.jobs.reload(m), m.loadCounts())
	}
	return in.update(msg)
}

func (m *Model) inputView(w int) string {
	in := m.input
	in.ti.SetWidth(max(w-2-len(in.ti.Prompt), 4))
	return clip(in.ti.View(), w)
}

// maxInputErrLines bounds the error under the input line, so the list
// keeps most of the screen.
const maxInputErrLines = 5

// inputErrLines are the lines under the input while what is typed does
// not parse: a marker under the term that failed, then the whole message.
func (m *Model) inputErrLines(w int) []string {
	in := m.input
	if in == nil || in.err == "" {
		return nil
	}
	t := m.theme
	msg := strings.TrimPrefix(in.err, engine.ErrInvalid.Error()+": ")
	var out []string
	if at, n, ok := failedTerm(in.ti.Value(), msg); ok {
		col := wOf(in.ti.Prompt) + wOf(termtext.Line(in.ti.Value()[:at]))
		if col+n <= w && wOf(in.ti.Prompt+termtext.Line(in.ti.Value())) < w-2 {
			out = append(out, strings.Repeat(" ", col)+t.FilterError.Render(strings.Repeat("^", max(n, 1))))
		}
	}
	wrapped := wrap("✗ "+termtext.Line(msg), w)
	if room := maxInputErrLines - len(out); len(wrapped) > room {
		wrapped = wrapped[:room]
		wrapped[room-1] = clip(wrapped[room-1], w)
	}
	for _, l := range wrapped {
		out = append(out, t.FilterError.Render(l))
	}
	return out
}

// failedTerm finds the term a query error names (query term "x": …) in
// the typed value: its byte offset and its width.
func failedTerm(value, msg string) (at, width int, ok bool) {
	for _, pre := range []string{"query term ", "term "} {
		rest, found := strings.CutPrefix(msg, pre)
		if !found {
			continue
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return 0, 0, false
		}
		term, err := strconv.Unquote(q)
		if err != nil || term == "" {
			return 0, 0, false
		}
		term = strings.TrimSuffix(term, "...")
		// The last whole-term occurrence: the one being typed.
		for i := len(value); i >= 0; {
			j := strings.LastIndex(value[:i], term)
			if j < 0 {
				break
			}
			if j == 0 || value[j-1] == ' ' {
				return j, wOf(termtext.Line(term)), true
			}
			i = j
		}
		return 0, 0, false
	}
	return 0, 0, false
}

// helpLines renders the full help from the keymap, one titled column per
// group, in as many columns as fit.
func (m *Model) helpLines(w, h int) []string {
	t := m.theme
	type col struct {
		lines []string
		width int
	}
	var cols []col
	for _, g := range m.km.HelpGroups() {
		c := col{}
		c.lines = append(c.lines, t.HelpTitle.Render(string(g.Group)))
		kw := 0
		for _, b := range g.Bindings {
			kw = max(kw, wOf(b.Help().Key))
		}
		for _, b := range g.Bindings {
			c.lines = append(c.lines, t.HelpKey.Render(fit(b.Help().Key, kw))+" "+t.HelpDesc.Render(b.Help().Desc))
		}
		for _, l := range c.lines {
			c.width = max(c.width, wOf(l))
		}
		cols = append(cols, c)
	}
	var out []string
	out = append(out, t.Bold.Render("keys")+t.Muted.Render(" — generated from the key map; "+m.km.B(keymap.Back).Help().Key+" closes"))
	if m.readOnly {
		out = append(out, t.WarnText.Render("read-only: actions that change jobs are not available"))
	}
	out = append(out, "")
	// Lay the columns out in rows of as many as fit.
	for start := 0; start < len(cols); {
		used, end := 0, start
		for end < len(cols) && (end == start || used+cols[end].width+4 <= w) {
			used += cols[end].width + 4
			end++
		}
		height := 0
		for _, c := range cols[start:end] {
			height = max(height, len(c.lines))
		}
		for i := 0; i < height; i++ {
			var b strings.Builder
			for _, c := range cols[start:end] {
				l := ""
				if i < len(c.lines) {
					l = c.lines[i]
				}
				b.WriteString(fit(l, c.width) + "    ")
			}
			out = append(out, clip(strings.TrimRight(b.String(), " "), w))
		}
		out = append(out, "")
		start = end
	}
	out = append(out, t.Bold.Render("filter")+t.Muted.Render(" fields: "+strings.Join(engine.QueryFields, " ")))
	out = append(out, t.Bold.Render("commands")+t.Muted.Render(" "+commandHelp()))
	var wrapped []string
	for _, l := range out {
		wrapped = append(wrapped, wrap(l, w)...)
	}
	if len(wrapped) <= h {
		m.helpScroll = 0
		return padLines(wrapped, h)
	}
	// Taller than the screen: scroll, and say what is below or above.
	rows := max(h-1, 1)
	m.helpScroll = min(max(m.helpScroll, 0), len(wrapped)-rows)
	view := slices.Clone(wrapped[m.helpScroll : m.helpScroll+rows])
	var more []string
	if below := len(wrapped) - m.helpScroll - rows; below > 0 {
		more = append(more, fmt.Sprintf("↓ %d more below", below))
	}
	if m.helpScroll > 0 {
		more = append(more, fmt.Sprintf("↑ %d above", m.helpScroll))
	}
	more = append(more, m.km.B(keymap.Down).Help().Key+"/"+m.km.B(keymap.Up).Help().Key+" scroll")
	view = append(view, t.Muted.Render(clip(strings.Join(more, " · "), w)))
	return padLines(view, h)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Clip(keys)
}
