package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// Editing a payload, a retry's new input, a replay's replacement result
// or a signal's payload: in $EDITOR on a temporary file, or in the
// built-in editor (editor.go) where no program may be started. Each is
// readied in a command (editorSetup.ready), opened when its
// editReadyMsg comes, and saved through saveEdit.

// editing is the edit on its way or open: editor is the built-in editor
// while open; pending, an edit whose save failed, opened again by the
// same key; opening, an editor is on its way (its text is being read):
// keys wait for it, esc gives it up. seq tags the editor asked for, so
// one given up is dropped when it comes. Without the wait, "e r" typed
// quickly would open a retry confirmation under the editor, armed for
// the next y.
type editing struct {
	editor  *payloadEditor
	pending *editReadyMsg
	opening bool
	seq     uint64
}

// editorSetup is where a command readies text for the editor: the
// built-in one (builtin), else a temporary file in dir for $EDITOR.
type editorSetup struct {
	dir     string
	builtin bool
}

func (m *Model) editorSetup() editorSetup {
	return editorSetup{dir: m.opts.TempDir, builtin: m.opts.BuiltinEditor}
}

// ready readies text for the editor r is for: made safe to show and edit
// for the built-in editor, else written to a temporary file named by
// pattern (r.path), removed again if it cannot be written whole. It runs
// in a command, never in Update.
func (e editorSetup) ready(r editReadyMsg, text []byte, pattern string) editReadyMsg {
	if e.builtin {
		r.orig = []byte(editableJSON(text))
		return r
	}
	f, err := os.CreateTemp(e.dir, pattern)
	if err != nil {
		r.err = err
		return r
	}
	_, werr := f.Write(text)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		r.err = err
		return r
	}
	r.path, r.orig = f.Name(), text
	return r
}

// editorCommand is the user's editor, split into words.
func (m *Model) editorCommand() []string {
	for _, e := range []string{m.opts.Editor, m.getenv("VISUAL"), m.getenv("EDITOR")} {
		if f := strings.Fields(e); len(f) > 0 {
			return f
		}
	}
	return []string{"vi"}
}

type editMode int

const (
	editPayload      editMode = iota // UpdatePayload with the version seen
	editRetry                        // RetryWithInput
	editReplayResult                 // the replacement result of a replay's step N−1 (replay.go)
	editSignal                       // the payload of a signal to send (waits.go)
)

type editReadyMsg struct {
	seq     uint64 // the editor asked for (editing.seq)
	mode    editMode
	id      string
	version int64
	// step is the replay's step N (editReplayResult): the text is the
	// result of step N−1, named stepName.
	step     int
	stepName string
	// signal is the name of the signal whose payload is edited
	// (editSignal).
	signal string
	path   string
	orig   []byte
	err    error
}

// removeFile removes the external editor's file, if there is one.
func (r editReadyMsg) removeFile() {
	if r.path != "" {
		_ = os.Remove(r.path)
	}
}

// removeCmd removes the external editor's file in a command (nil when
// there is none): Update does no IO.
func (r editReadyMsg) removeCmd() tea.Cmd {
	if r.path == "" {
		return nil
	}
	return func() tea.Msg { r.removeFile(); return nil }
}

type editorDoneMsg struct {
	ready editReadyMsg
	err   error
}

type editSavedMsg struct {
	mode editMode
	id   string
	job  *engine.Job
	// invalid is set when the edited text is not a JSON object; the file
	// is kept so the next edit starts from it.
	invalid error
	same    bool
	ready   editReadyMsg
	err     error
	// preview is the replay preview with the edited result
	// (editReplayResult), to confirm before anything runs.
	preview *replayPreviewMsg
	// signalPayload is the edited signal payload, compact (editSignal),
	// to confirm before it is sent.
	signalPayload json.RawMessage
}

// prepareEdit fetches the payload with its version and writes it to a
// temporary file for the editor.
func (m *Model) prepareEdit(mode editMode, id string) tea.Cmd {
	ctl, ctx, setup := m.ctl, m.ctx, m.editorSetup()
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		d, err := ctl.GetJob(c, id, true)
		if err != nil {
			return editReadyMsg{mode: mode, id: id, err: err}
		}
		r := editReadyMsg{mode: mode, id: id, version: d.Job.Version}
		return setup.ready(r, prettyJSON(d.Job.Payload), "sluice-payload-*.json")
	}
}

// saveEdit checks the edited text is a JSON object and saves it: text,
// from the built-in editor, or else the edited file's.
func (m *Model) saveEdit(r editReadyMsg, text []byte) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		out := editSavedMsg{mode: r.mode, id: r.id, ready: r}
		b, err := text, error(nil)
		if b == nil {
			if b, err = os.ReadFile(r.path); err != nil {
				out.err = err
				return out
			}
		}
		if r.mode == editReplayResult {
			return replayResultEdited(ctx, ctl, r, b, out)
		}
		if r.mode == editSignal {
			return signalEdited(r, b, out)
		}
		if strings.TrimSpace(string(b)) == strings.TrimSpace(string(r.orig)) {
			r.removeFile()
			out.same = true
			return out
		}
		if err := checkJSONObject(b); err != nil {
			out.invalid = err
			return out
		}
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		var j *engine.Job
		if r.mode == editPayload {
			j, err = ctl.UpdatePayload(c, r.id, json.RawMessage(b), r.version)
		} else {
			j, err = ctl.RetryWithInput(c, r.id, engine.RetryWithInputParams{Payload: json.RawMessage(b)})
		}
		if err != nil {
			out.err = err
			return out
		}
		r.removeFile()
		out.job = j
		return out
	}
}

// checkJSONObject says where a payload is not a JSON object.
func checkJSONObject(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + strings.Count(string(b[:min(int(se.Offset), len(b))]), "\n")
			return fmt.Errorf("not valid JSON (line %d): %v", line, err)
		}
		return fmt.Errorf("not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("a payload is a JSON object ({...})")
	}
	return nil
}

// startEdit edits the payload of the job shown (oneJob) in $EDITOR: to
// save it in place (e) or to retry with it as new input (w).
func (m *Model) startEdit(mode editMode) tea.Cmd {
	j, why, info := m.oneJob()
	if j == nil {
		return m.noJob(why, info)
	}
	if p := m.edit.pending; p != nil && p.id == j.ID && p.mode == mode {
		return m.editReady(*p)
	}
	return m.openingEditor(m.prepareEdit(mode, j.ID))
}

// openingEditor runs cmd, which prepares an editor, with the keys held
// until it opens (editing.opening).
func (m *Model) openingEditor(cmd tea.Cmd) tea.Cmd {
	m.edit.seq++
	seq := m.edit.seq
	m.edit.opening = true
	return func() tea.Msg {
		msg := cmd()
		if r, ok := msg.(editReadyMsg); ok {
			r.seq = seq
			return r
		}
		return msg
	}
}

func (m *Model) editReady(msg editReadyMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr(fmt.Sprintf("edit %s: %s", termtext.Line(msg.id), termtext.Line(msg.err.Error())))
	}
	if m.opts.BuiltinEditor {
		return m.openEditor(msg)
	}
	argv := append(m.editorCommand(), msg.path)
	c := exec.Command(argv[0], argv[1:]...)
	return tea.ExecProcess(c, func(err error) tea.Msg { return editorDoneMsg{ready: msg, err: err} })
}

func (m *Model) editorDone(msg editorDoneMsg) tea.Cmd {
	if msg.err != nil {
		m.edit.pending = &msg.ready
		return m.toastErr(fmt.Sprintf("editor: %s — nothing saved", termtext.Line(msg.err.Error())))
	}
	return m.saveEdit(msg.ready, nil)
}

func (m *Model) editSaved(msg editSavedMsg) tea.Cmd {
	if m.editorSaved(msg) {
		return nil // refused: the text stays in the editor, with the reason
	}
	m.edit.pending = nil
	if msg.mode == editReplayResult {
		return m.replayResultSaved(msg)
	}
	if msg.mode == editSignal {
		return m.signalPayloadEdited(msg)
	}
	key := m.km.B(keymap.Edit).Help().Key
	if msg.mode == editRetry {
		key = m.km.B(keymap.RetryInput).Help().Key
	}
	switch {
	case msg.invalid != nil:
		r := msg.ready
		m.edit.pending = &r
		return m.toastErr(fmt.Sprintf("%s — nothing saved; %s edits it again", msg.invalid, key))
	case msg.err != nil:
		if isErr(msg.err, engine.ErrConflict) && msg.mode == editPayload {
			return m.toastErr("the payload changed since it was opened — nothing saved; " + key + " edits the new version")
		}
		return m.toastErr(fmt.Sprintf("save %s: %s", termtext.Line(msg.id), termtext.Line(msg.err.Error())))
	case msg.same:
		return m.toast("payload unchanged — nothing saved")
	}
	text := fmt.Sprintf("payload saved (version %d)", msg.job.Version)
	if msg.mode == editRetry {
		text = "retried with new input as " + termtext.Line(msg.job.ID)
	}
	cmds := []tea.Cmd{m.toast(text), m.loadCounts(), m.jobs.refresh(m)}
	if m.sheet.open && m.sheet.id == msg.id && msg.mode == editPayload {
		// Show what was saved: one load, with the payload, so no answer
		// without it can land after and hide it.
		m.sheet.stale = false
		if !m.sheet.showPayload {
			m.sheet.scrollBefore = m.sheet.scroll
		}
		m.sheet.showPayload = true
		m.sheet.jumpToPayload = true
		m.sheet.payload = nil
		m.sheet.payloadLoading = true
		m.sheet.invalidate()
		cmds = append(cmds, m.loadDetail(msg.id, true))
	} else if m.sheet.open && m.sheet.id == msg.id {
		m.sheet.stale = false
		cmds = append(cmds, m.loadDetail(msg.id, m.sheet.showPayload))
	}
	return tea.Batch(cmds...)
}
