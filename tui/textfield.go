package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/keymap"
)

// textField is a one-line field of a dialog that takes the keys while on:
// it keeps what is typed (in), whether it has the keys (on) and why what
// was typed was refused (err). The bulk preview's cutoff, start time and
// canary fields are each one, and differ only in what they accept and
// what their owner does with the text when it is left.
type textField struct {
	in  string
	on  bool
	err string
	// accept holds the characters the field takes; max is its length.
	accept string
	max    int
}

// fieldAction is what a key did to a field.
type fieldAction int

const (
	// fieldTyped: the key edited the field, or was ignored.
	fieldTyped fieldAction = iota
	// fieldLeft: tab or enter: the owner reads what was typed (and
	// puts the keys back in the field, with err set, to refuse it).
	fieldLeft
	// fieldDropped: Back (esc): the owner closes its dialog.
	fieldDropped
)

// key types msg into the field.
func (f *textField) key(km *keymap.KeyMap, msg tea.KeyPressMsg) fieldAction {
	switch k := msg.String(); {
	case k == "tab" || k == "enter":
		return fieldLeft
	case km.Matches(msg, keymap.Back):
		return fieldDropped
	case k == "backspace":
		if f.in != "" {
			f.in = f.in[:len(f.in)-1]
		}
	case len(msg.Text) == 1 && strings.ContainsRune(f.accept, rune(msg.Text[0])) && len(f.in) < f.max:
		f.in += msg.Text
	}
	return fieldTyped
}

// shown is the field's text as drawn: with the caret while it has the
// keys.
func (f *textField) shown() string {
	if f.on {
		return f.in + "▏"
	}
	return f.in
}
