package tui

import (
	"fmt"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
)

// helpScreen is the full help, over the body while open: generated
// from the key map, scrolled when taller than the screen.
type helpScreen struct {
	open bool
	// scroll is the first help line shown (clamped when drawn).
	scroll int
	w, h   int
}

// SetSize sets the size the help is drawn at (the body's).
func (hs *helpScreen) SetSize(w, h int) { hs.w, hs.h = w, h }

// Update takes the keys while the help is open: help, back or quit close
// it, the moves scroll it.
func (hs *helpScreen) Update(km *keymap.KeyMap, msg tea.Msg) tea.Cmd {
	key, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return nil
	}
	page := max(hs.h-1, 1)
	switch {
	case km.Matches(key, keymap.Help) || km.Matches(key, keymap.Back) || km.Matches(key, keymap.Quit):
		hs.open = false
		hs.scroll = 0
	case km.Matches(key, keymap.Down):
		hs.scroll++
	case km.Matches(key, keymap.Up):
		hs.scroll--
	case km.Matches(key, keymap.PageDown):
		hs.scroll += page
	case km.Matches(key, keymap.PageUp):
		hs.scroll -= page
	case km.Matches(key, keymap.Top):
		hs.scroll = 0
	case km.Matches(key, keymap.Bottom):
		hs.scroll = 1 << 20 // clamped when drawn
	}
	hs.scroll = max(hs.scroll, 0)
	return nil
}

// View renders the full help from the keymap, one titled column per
// group, in as many columns as fit; readOnly says actions are not
// available.
func (hs *helpScreen) View(km *keymap.KeyMap, t *themes.Theme, readOnly bool) []string {
	w, h := hs.w, hs.h
	type col struct {
		lines []string
		width int
	}
	var cols []col
	for _, g := range km.HelpGroups() {
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
	out = append(out, t.Bold.Render("keys")+t.Muted.Render(" — generated from the key map; "+km.B(keymap.Back).Help().Key+" closes"))
	if readOnly {
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
		hs.scroll = 0
		return padLines(wrapped, h)
	}
	// Taller than the screen: scroll, and say what is below or above.
	rows := max(h-1, 1)
	hs.scroll = min(max(hs.scroll, 0), len(wrapped)-rows)
	view := slices.Clone(wrapped[hs.scroll : hs.scroll+rows])
	var more []string
	if below := len(wrapped) - hs.scroll - rows; below > 0 {
		more = append(more, fmt.Sprintf("↓ %d more below", below))
	}
	if hs.scroll > 0 {
		more = append(more, fmt.Sprintf("↑ %d above", hs.scroll))
	}
	more = append(more, km.B(keymap.Down).Help().Key+"/"+km.B(keymap.Up).Help().Key+" scroll")
	view = append(view, t.Muted.Render(clip(strings.Join(more, " · "), w)))
	return padLines(view, h)
}
