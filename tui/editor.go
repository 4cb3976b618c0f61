package tui

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
)

// The payload editor inside the console, for sessions that must not start
// an external program (Options.BuiltinEditor: consoles served over SSH).
// It edits the same pretty-printed JSON $EDITOR would get and saves
// through the same path (saveEdit), with the version that was read.

// maxBuiltinEdit is the largest payload the built-in editor opens.
const maxBuiltinEdit = 256 << 10

type payloadEditor struct {
	ready  editReadyMsg
	ta     textarea.Model
	note   string // why the last save was refused
	saving bool
	// w is the box's width.
	w int
}

// openEditor opens the built-in editor on a fetched payload.
func (m *Model) openEditor(r editReadyMsg) tea.Cmd {
	if len(r.orig) > maxBuiltinEdit {
		return m.toastErr(fmt.Sprintf("the payload is %d KB: too large to edit in the console", len(r.orig)>>10))
	}
	ta := textarea.New()
	ta.ShowLineNumbers = true
	ta.Prompt = ""
	ta.CharLimit = 0
	ta.MaxHeight = 0
	ta.SetStyles(m.theme.Editor)
	text := string(r.orig) // editableJSON already (prepareEdit)
	ta.SetValue(text)
	if ta.Value() != text {
		// The text area holds at most 10,000 lines: saving what it kept
		// would cut the payload.
		return m.toastErr(fmt.Sprintf("the payload has %d lines: too many to edit in the console", strings.Count(text, "\n")+1))
	}
	ta.MoveToBegin()
	m.edit.editor = &payloadEditor{ready: r, ta: ta}
	m.sizeEditor()
	return m.edit.editor.ta.Focus()
}

// sizeEditor fits the open editor to the screen.
func (m *Model) sizeEditor() {
	if m.edit.editor != nil {
		m.edit.editor.SetSize(m.width, m.bodyHeight())
	}
}

// SetSize fits the editor's box, and its text area, to a screen w wide
// whose body is h high.
func (ed *payloadEditor) SetSize(w, h int) {
	ed.w = min(max(w-4, 20), 120)
	h = max(h, 8)
	ed.ta.SetWidth(max(ed.w-4, 10))
	ed.ta.SetHeight(max(h-6, 3))
}

// Update takes the keys and pastes while the editor is open: save saves
// (once at a time), back closes it, anything else edits.
func (ed *payloadEditor) Update(m *Model, msg tea.Msg) tea.Cmd {
	if key, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case m.km.Matches(key, keymap.Save):
			if ed.saving {
				return nil
			}
			ed.saving, ed.note = true, ""
			return m.saveEdit(ed.ready, []byte(ed.ta.Value()))
		case m.km.Matches(key, keymap.Back):
			m.edit.editor = nil
			return m.toast("edit cancelled — nothing saved")
		}
	}
	var cmd tea.Cmd
	ed.ta, cmd = ed.ta.Update(msg)
	return cmd
}

// editorSaved takes a save's outcome while the editor is open: a refusal
// keeps the text in the editor with the reason; anything else closes it.
// It reports whether the outcome was the editor's.
func (m *Model) editorSaved(msg editSavedMsg) bool {
	ed := m.edit.editor
	if ed == nil || ed.ready.id != msg.id || ed.ready.mode != msg.mode {
		return false
	}
	ed.saving = false
	switch {
	case msg.invalid != nil:
		ed.note = msg.invalid.Error()
		return true
	case msg.err != nil && isErr(msg.err, engine.ErrConflict) && msg.mode == editPayload:
		ed.note = "the payload changed since it was opened: nothing saved (" +
			m.km.B(keymap.Back).Help().Key + ", then " + m.km.B(keymap.Edit).Help().Key + " edits the new version)"
		return true
	case msg.err != nil:
		ed.note = "not saved: " + termtext.Line(msg.err.Error())
		return true
	}
	m.edit.editor = nil
	return false
}

// View draws the editor in its box.
func (ed *payloadEditor) View(km *keymap.KeyMap, t *themes.Theme) []string {
	title := "Edit the payload of " + termtext.Line(ed.ready.id) + " (version " + strconv.FormatInt(ed.ready.version, 10) + ")"
	switch ed.ready.mode {
	case editRetry:
		title = "Retry " + termtext.Line(ed.ready.id) + " with new input"
	case editReplayResult:
		title = replayResultTitle(ed.ready)
	case editSignal:
		title = signalEditTitle(ed.ready)
	}
	lines := []string{t.DialogHead.Render(title), ""}
	lines = append(lines, strings.Split(ed.ta.View(), "\n")...)
	lines = append(lines, "")
	switch {
	case ed.saving:
		lines = append(lines, t.HelpDesc.Render("saving…"))
	case ed.note != "":
		lines = append(lines, t.ErrorText.Render(ed.note))
	default:
		lines = append(lines, editorHint(km, t))
	}
	return dialogBox(t, lines, ed.w)
}

// editorHint names the editor's own keys; every other key edits.
func editorHint(km *keymap.KeyMap, t *themes.Theme) string {
	return t.HelpKey.Render(km.B(keymap.Save).Help().Key) + t.HelpDesc.Render(" save · ") +
		t.HelpKey.Render(km.B(keymap.Back).Help().Key) + t.HelpDesc.Render(" cancel")
}

// editableJSON is pretty JSON made safe to show and edit: every rune that
// is not printable — C1 controls, line and paragraph separators, bidi
// overrides, bytes that are not UTF-8 — is written as its \u escape. In
// JSON such a rune can only stand inside a string, where the escape means
// the same, so the text decodes to the same value and cannot drive the
// terminal.
func editableJSON(b []byte) string {
	var s strings.Builder
	s.Grow(len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == '\n' || r == '\t' || (r >= 0x20 && r < 0x7f):
			s.WriteRune(r)
		case r == utf8.RuneError && size == 1:
			s.WriteString(`\ufffd`)
		case !unicode.IsPrint(r) || unicode.Is(unicode.Bidi_Control, r):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&s, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&s, `\u%04x`, r)
			}
		default:
			s.WriteRune(r)
		}
		i += size
	}
	return s.String()
}
