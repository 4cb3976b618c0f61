package tui

import (
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/themes"
)

// Toasts: short results with a time to live, in the bottom right corner.
// They give way to a dialog (a confirmation, the bulk dialog, the
// built-in editor): while one is open no toast is drawn, so none can
// cover its count or its keys (at 60×12 one covered the confirm key).
// Their time stops meanwhile: a toast that comes under a dialog waits
// for it to close, and one it covered shows for the rest of its time
// after, so each is read all the same.

type toast struct {
	id   int
	text string
	err  bool
	// left is how long it is still to be shown; since, when its current
	// showing began (zero while a dialog hides it); gen tags the tick
	// that ends that showing, so the tick of an earlier one is dropped.
	left  time.Duration
	since time.Time
	gen   uint64
}

// toasts is the stack of toasts shown, at most three; id numbers them
// and gen their showings.
type toasts struct {
	list []toast
	id   int
	gen  uint64
}

// maxToasts is how many toasts are shown at once: a new one pushes the
// oldest out.
const maxToasts = 3

// add stacks a toast; sync starts its time.
func (ts *toasts) add(text string, isErr bool, ttl time.Duration) {
	ts.id++
	ts.list = append(ts.list, toast{id: ts.id, text: text, err: isErr, left: ttl})
	if len(ts.list) > maxToasts {
		ts.list = ts.list[len(ts.list)-maxToasts:]
	}
}

// sync stops the time of the toasts while a dialog is open, and starts
// it again once none is: what was left of it, at least a second.
func (ts *toasts) sync(open bool, now time.Time) tea.Cmd {
	var cmds []tea.Cmd
	for i := range ts.list {
		t := &ts.list[i]
		switch {
		case open && !t.since.IsZero():
			t.left -= now.Sub(t.since)
			t.since = time.Time{}
		case !open && t.since.IsZero():
			ts.gen++
			t.since, t.gen = now, ts.gen
			id, gen := t.id, t.gen
			cmds = append(cmds, tea.Tick(max(t.left, time.Second), func(time.Time) tea.Msg { return toastExpireMsg{id: id, gen: gen} }))
		}
	}
	return tea.Batch(cmds...)
}

// Update takes a toast whose showing ended off the screen.
func (ts *toasts) Update(msg tea.Msg) {
	if msg, ok := msg.(toastExpireMsg); ok {
		ts.list = slices.DeleteFunc(ts.list, func(t toast) bool {
			return t.id == msg.id && t.gen == msg.gen && !t.since.IsZero()
		})
	}
}

// View draws the toasts over the bottom right corner of body (w×h).
func (ts *toasts) View(body []string, w, h int, t *themes.Theme) []string {
	if len(ts.list) == 0 {
		return body
	}
	tw := min(max(w/2, 40), w-2)
	var lines []string
	for _, to := range ts.list {
		st := t.Toast
		if to.err {
			st = t.ToastError
		}
		box := st.Width(min(wOf(to.text)+4, tw)).Render(to.text)
		lines = append(lines, strings.Split(box, "\n")...)
	}
	if len(lines) > h {
		lines = lines[len(lines)-h:]
	}
	bw := 0
	for _, l := range lines {
		bw = max(bw, wOf(l))
	}
	return overlay(body, lines, max(w-bw-1, 0), h-len(lines), w)
}

func (m *Model) toast(text string) tea.Cmd { return m.addToast(text, false, 4*time.Second) }

func (m *Model) toastErr(text string) tea.Cmd { return m.addToast(text, true, 8*time.Second) }

func (m *Model) addToast(text string, isErr bool, ttl time.Duration) tea.Cmd {
	m.toasts.add(text, isErr, ttl)
	if isErr {
		m.opts.Logger.Info("console error shown", "text", text)
	}
	return m.syncToasts()
}

// dialogOpen reports whether a dialog is on screen: toasts give way to it.
func (m *Model) dialogOpen() bool {
	return m.dlg.confirm != nil || (m.dlg.bulk != nil && m.dlg.bulk.visible) || m.edit.editor != nil
}

// syncToasts stops or starts the toasts' time as a dialog opens or closes.
func (m *Model) syncToasts() tea.Cmd { return m.toasts.sync(m.dialogOpen(), m.now()) }
