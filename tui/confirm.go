package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

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
	// w and h are the box's width and the height it may take.
	w, h int
}

// dialogNote is a paragraph of a confirmation, wrapped when drawn.
type dialogNote struct {
	text  string
	style lipgloss.Style
}

// SetSize sets the box's width and the most lines it may take.
func (d *confirmDialog) SetSize(w, h int) { d.w, d.h = w, h }

// Update takes the keys while the confirmation is open: confirm runs it,
// back, quit or n cancel it; either closes it.
func (d *confirmDialog) Update(m *Model, msg tea.Msg) tea.Cmd {
	key, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return nil
	}
	km := m.km
	switch {
	case km.Matches(key, keymap.Confirm):
		m.dlg.confirm = nil
		return d.yes()
	case d.edit != nil && km.Matches(key, keymap.ReplayResult):
		m.dlg.confirm = nil
		return d.edit()
	case km.Matches(key, keymap.Back), km.Matches(key, keymap.Quit), key.String() == "n":
		m.dlg.confirm = nil
		return m.toast("cancelled — nothing changed")
	}
	return nil
}

// View draws the confirmation in its box.
func (d *confirmDialog) View(km *keymap.KeyMap, t *themes.Theme) []string {
	inner := d.w - 4
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
	lines = append(lines, "", d.hint(km, t))
	return dialogBox(t, keepEnds(lines, d.h-2, 1, 2), d.w)
}

// hint names the confirmation's keys.
func (d *confirmDialog) hint(km *keymap.KeyMap, t *themes.Theme) string {
	edit := ""
	if d.edit != nil && km.Enabled(keymap.ReplayResult) {
		edit = t.HelpKey.Render(km.B(keymap.ReplayResult).Help().Key) + t.HelpDesc.Render(" "+d.editHint+" · ")
	}
	return t.HelpKey.Render(km.B(keymap.Confirm).Help().Key) + t.HelpDesc.Render(" confirm · ") + edit +
		t.HelpKey.Render(km.B(keymap.Back).Help().Key) + t.HelpDesc.Render(" cancel")
}

// dialogBox draws lines in the dialog frame, w wide.
func dialogBox(t *themes.Theme, lines []string, w int) []string {
	inner := max(w-4, 1)
	for i, l := range lines {
		lines[i] = fit(clip(l, inner), inner)
	}
	return strings.Split(t.Dialog.Width(w).Render(strings.Join(lines, "\n")), "\n")
}
