package tui

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/themes"
)

// The input line: / filter and : command.

type inputKind int

const (
	inputFilter inputKind = iota
	inputCommand
)

// inputLine is the / filter or the : command being typed, with the
// error of what is typed while it does not parse.
type inputLine struct {
	kind inputKind
	ti   textinput.Model
	err  string
	w    int
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
	m.dlg.input = in
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

// Update takes the keys and pastes while the line is open: esc closes
// it, enter runs the command or applies the filter (an error keeps it
// open, saying why), anything else edits.
func (in *inputLine) Update(m *Model, msg tea.Msg) tea.Cmd {
	key, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return in.update(msg)
	}
	switch key.String() {
	case "esc":
		m.dlg.input = nil
		return nil
	case "enter":
		val := strings.TrimSpace(in.ti.Value())
		if in.kind == inputCommand {
			cmd, err := m.runCommand(val)
			if err != nil {
				in.err = err.Error()
				return nil
			}
			m.dlg.input = nil
			return cmd
		}
		f, err := engine.ParseQuery(val)
		if err != nil {
			in.err = err.Error()
			return nil
		}
		m.dlg.input = nil
		m.jobs.setFilter(val, f)
		return tea.Batch(m.jobs.reload(m), m.loadCounts())
	}
	return in.update(key)
}

// SetSize fits the line to w columns.
func (in *inputLine) SetSize(w, _ int) {
	in.w = w
	in.ti.SetWidth(max(w-2-len(in.ti.Prompt), 4))
}

// View draws the line and, under it, what does not parse.
func (in *inputLine) View(t *themes.Theme) []string {
	return append([]string{clip(in.ti.View(), in.w)}, in.errLines(in.w, t)...)
}

// maxInputErrLines bounds the error under the input line, so the list
// keeps most of the screen.
const maxInputErrLines = 5

// errLines are the lines under the input while what is typed does
// not parse: a marker under the term that failed, then the whole message.
func (in *inputLine) errLines(w int, t *themes.Theme) []string {
	if in.err == "" {
		return nil
	}
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
