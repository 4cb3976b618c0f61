// Package keymap holds every key binding of the console in one place: the
// handlers match against it and the help is generated from it, so a
// rebound key shows up rebound everywhere.
//
// Each binding has a stable action name ("retry", "mark", ...) used by the
// user's overrides (overrides.go: the keys section of
// $XDG_CONFIG_HOME/sluice/config.yaml, or the keys file,
// $XDG_CONFIG_HOME/sluice/keys.yaml, in one format) and a Dangerous flag:
// actions that change jobs or queues, which read-only mode removes from
// the screen and the help.
//
// The package knows nothing of jobs or screens.
package keymap

import (
	"fmt"
	"slices"

	"charm.land/bubbles/v2/key"
)

// Action names a binding, in override files and in code.
type Action string

// The actions of the console.
const (
	Up          Action = "up"
	Down        Action = "down"
	PageUp      Action = "page_up"
	PageDown    Action = "page_down"
	Top         Action = "top"
	Bottom      Action = "bottom"
	Open        Action = "open"
	NextTab     Action = "next_tab"
	PrevTab     Action = "prev_tab"
	SheetDown   Action = "sheet_down"
	SheetUp     Action = "sheet_up"
	NextSection Action = "next_section"
	PrevSection Action = "prev_section"
	StepDown    Action = "step_down"
	StepUp      Action = "step_up"
	Mark        Action = "mark"
	MarkAll     Action = "mark_visible"
	SelectAll   Action = "select_matching"
	Retry       Action = "retry"
	Cancel      Action = "cancel"
	Delete      Action = "delete"
	Release     Action = "release"
	Edit        Action = "edit"
	RetryInput  Action = "retry_with_input"
	Bulk        Action = "bulk"
	Pause       Action = "pause"
	RunNow      Action = "run_now"
	SetLimit    Action = "set_limit"
	// ResolveGroup and IgnoreGroup close an error group (:errors), the
	// note typed on the command line; IgnoreGroup on an ignored group
	// brings it back. ShowIgnored lists the ignored groups too, or not.
	ResolveGroup Action = "resolve_group"
	IgnoreGroup  Action = "ignore_group"
	ShowIgnored  Action = "show_ignored"
	ReplayStep   Action = "replay_step"
	// ReplayResult edits the replacement result of step N−1 in a replay's
	// preview: read only inside that dialog, like Confirm.
	ReplayResult Action = "replay_result"
	Signal       Action = "signal"
	Copy         Action = "copy"
	CopyTrace    Action = "copy_trace"
	// CompareAttempts puts two of the sheet's job's runs side by side.
	CompareAttempts Action = "compare_attempts"
	Payload         Action = "payload"
	Filter          Action = "filter"
	Command         Action = "command"
	Help            Action = "help"
	Back            Action = "back"
	Save            Action = "save"
	Quit            Action = "quit"
	Confirm         Action = "confirm"
	Refresh         Action = "refresh"
	// Links goes to the sheet's links from anywhere on it, and on to the
	// next link once there.
	Links Action = "links"
	// BulkStart types a bulk run's start time in the bulk preview (the
	// run then waits for it): read only inside that dialog, like Confirm.
	BulkStart Action = "bulk_start"
	// BulkCanary types a bulk retry's canary size, then its halt
	// threshold, in the bulk preview: read only inside that dialog.
	BulkCanary Action = "bulk_canary"
	// ResumeOperation sets a halted canary run going again (operations).
	ResumeOperation Action = "resume_operation"
)

// Group is a heading of the help.
type Group string

const (
	GroupMove    Group = "move"
	GroupSelect  Group = "select"
	GroupAct     Group = "act"
	GroupView    Group = "view"
	GroupGeneral Group = "general"
)

// Groups lists the help's columns in order.
var Groups = []Group{GroupMove, GroupSelect, GroupAct, GroupView, GroupGeneral}

// Entry is one binding with what the console needs to know about it.
type Entry struct {
	Action  Action
	Group   Group
	Binding key.Binding
	// Dangerous actions change jobs or queues; read-only mode drops them.
	Dangerous bool
}

// KeyMap is every binding of the console.
type KeyMap struct {
	entries []Entry
	index   map[Action]int
}

type def struct {
	a      Action
	g      Group
	keys   []string
	help   string
	desc   string
	danger bool
}

var defaults = []def{
	{Up, GroupMove, []string{"k", "up"}, "↑/k", "up", false},
	{Down, GroupMove, []string{"j", "down"}, "↓/j", "down", false},
	{PageUp, GroupMove, []string{"pgup", "ctrl+b"}, "pgup", "page up", false},
	{PageDown, GroupMove, []string{"pgdown", "ctrl+f"}, "pgdn", "page down", false},
	{Top, GroupMove, []string{"g", "home"}, "g", "top", false},
	{Bottom, GroupMove, []string{"G", "end"}, "G", "bottom", false},
	{NextTab, GroupMove, []string{"tab"}, "tab", "next state", false},
	{PrevTab, GroupMove, []string{"shift+tab"}, "shift+tab", "previous state", false},
	{SheetDown, GroupMove, []string{"ctrl+d", "shift+down"}, "ctrl+d", "scroll sheet down", false},
	{SheetUp, GroupMove, []string{"ctrl+u", "shift+up"}, "ctrl+u", "scroll sheet up", false},
	{NextSection, GroupMove, []string{"]"}, "]", "next sheet section", false},
	{PrevSection, GroupMove, []string{"["}, "[", "previous sheet section", false},
	{StepDown, GroupMove, []string{"J"}, "J", "next step or link", false},
	{StepUp, GroupMove, []string{"K"}, "K", "previous step or link", false},
	{Links, GroupMove, []string{"l"}, "l", "links (again: next)", false},

	{Mark, GroupSelect, []string{"space"}, "space", "mark", false},
	{MarkAll, GroupSelect, []string{"ctrl+a"}, "ctrl+a", "mark visible", false},
	{SelectAll, GroupSelect, []string{"A"}, "A", "select all matching", false},

	{Retry, GroupAct, []string{"r"}, "r", "retry", true},
	{Cancel, GroupAct, []string{"c"}, "c", "cancel", true},
	{Delete, GroupAct, []string{"d"}, "d", "delete", true},
	{Release, GroupAct, []string{"u"}, "u", "release", true},
	{Edit, GroupAct, []string{"e"}, "e", "edit payload", true},
	{RetryInput, GroupAct, []string{"w"}, "w", "retry with new input", true},
	{Bulk, GroupAct, []string{"b"}, "b", "bulk from filter", true},
	{Pause, GroupAct, []string{"P"}, "P", "pause/resume queue or schedule", true},
	{RunNow, GroupAct, []string{"T"}, "T", "run schedule now", true},
	{SetLimit, GroupAct, []string{"L"}, "L", "set limit (limits)", true},
	{ResolveGroup, GroupAct, []string{"V"}, "V", "resolve error group", true},
	{IgnoreGroup, GroupAct, []string{"I"}, "I", "ignore/unignore error group", true},
	{ReplayStep, GroupAct, []string{"F"}, "F", "replay from step", true},
	{ReplayResult, GroupAct, []string{"e"}, "e", "replace step N−1's result (replay preview)", true},
	{BulkStart, GroupAct, []string{"@"}, "@", "start at a time (bulk preview)", true},
	{BulkCanary, GroupAct, []string{"C"}, "C", "canary size and halt threshold (bulk preview)", true},
	{ResumeOperation, GroupAct, []string{"O"}, "O", "resume a halted run (operations)", true},
	{Signal, GroupAct, []string{"s"}, "s", "send signal", true},

	{Open, GroupView, []string{"enter"}, "enter", "open", false},
	{Payload, GroupView, []string{"p"}, "p", "payload", false},
	{Copy, GroupView, []string{"y"}, "y", "copy id", false},
	{CopyTrace, GroupView, []string{"Y"}, "Y", "copy trace id", false},
	{CompareAttempts, GroupView, []string{"="}, "=", "compare attempts", false},
	{Filter, GroupView, []string{"/"}, "/", "filter", false},
	{Command, GroupView, []string{":"}, ":", "command", false},
	{Refresh, GroupView, []string{"ctrl+r"}, "ctrl+r", "reload, recount", false},
	{ShowIgnored, GroupView, []string{"i"}, "i", "ignored groups", false},

	{Help, GroupGeneral, []string{"?"}, "?", "help", false},
	{Back, GroupGeneral, []string{"esc"}, "esc", "back", false},
	{Quit, GroupGeneral, []string{"q", "ctrl+c"}, "q", "quit", false},
	{Confirm, GroupGeneral, []string{"y"}, "y", "confirm", false},
	{Save, GroupGeneral, []string{"ctrl+s"}, "ctrl+s", "save (payload editor)", true},
}

// Default returns the default bindings: vim keys with arrow aliases.
func Default() *KeyMap {
	km := &KeyMap{index: make(map[Action]int, len(defaults))}
	for _, d := range defaults {
		km.index[d.a] = len(km.entries)
		km.entries = append(km.entries, Entry{
			Action: d.a, Group: d.g, Dangerous: d.danger,
			Binding: key.NewBinding(key.WithKeys(d.keys...), key.WithHelp(d.help, d.desc)),
		})
	}
	return km
}

// Actions lists every action name, in help order.
func Actions() []Action {
	out := make([]Action, len(defaults))
	for i, d := range defaults {
		out[i] = d.a
	}
	return out
}

// clone copies the map so a change never leaks into another session's.
func (km *KeyMap) clone() *KeyMap {
	c := &KeyMap{entries: slices.Clone(km.entries), index: make(map[Action]int, len(km.index))}
	for k, v := range km.index {
		c.index[k] = v
	}
	return c
}

// B returns the binding of an action (a disabled, empty one for an unknown
// action, which matches nothing).
func (km *KeyMap) B(a Action) key.Binding {
	if i, ok := km.index[a]; ok {
		return km.entries[i].Binding
	}
	return key.NewBinding(key.WithDisabled())
}

// Matches reports whether a key press is bound to action a (and a is
// enabled).
func (km *KeyMap) Matches(msg fmt.Stringer, a Action) bool {
	return key.Matches(msg, km.B(a))
}

// Enabled reports whether action a can be used (not removed by read-only
// mode or unbound).
func (km *KeyMap) Enabled(a Action) bool {
	b := km.B(a)
	return b.Enabled() && len(b.Keys()) > 0
}

// Dangerous reports whether action a changes jobs or queues.
func (km *KeyMap) Dangerous(a Action) bool {
	if i, ok := km.index[a]; ok {
		return km.entries[i].Dangerous
	}
	return false
}

// Entries returns every binding, in help order.
func (km *KeyMap) Entries() []Entry { return slices.Clone(km.entries) }

// ReadOnly returns a copy with every dangerous action disabled: they match
// no key and are left out of the help.
func (km *KeyMap) ReadOnly() *KeyMap {
	c := km.clone()
	for i := range c.entries {
		if c.entries[i].Dangerous {
			c.entries[i].Binding.SetEnabled(false)
		}
	}
	return c
}

// Without returns a copy with the given actions disabled (used for roles
// that may not see payloads).
func (km *KeyMap) Without(actions ...Action) *KeyMap {
	c := km.clone()
	for _, a := range actions {
		if i, ok := c.index[a]; ok {
			c.entries[i].Binding.SetEnabled(false)
		}
	}
	return c
}

// ShortHelp is the one-line help of the status bar.
func (km *KeyMap) ShortHelp() []key.Binding {
	return km.Short(Open, Mark, Retry, Bulk, Filter, Command, Help, Quit)
}

// Short returns the enabled bindings of the given actions, for a one-line
// help of a screen.
func (km *KeyMap) Short(actions ...Action) []key.Binding {
	var out []key.Binding
	for _, a := range actions {
		if b := km.B(a); b.Enabled() && len(b.Keys()) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// dialogOnly says whether a is read only inside a dialog, whose hint names
// its key: left out of the help screens, and free to share a key.
func dialogOnly(a Action) bool {
	return a == Confirm || a == ReplayResult || a == BulkStart || a == BulkCanary
}

// FullHelp is the help screen: one column per group, enabled bindings only.
func (km *KeyMap) FullHelp() [][]key.Binding {
	var cols [][]key.Binding
	for _, g := range Groups {
		var col []key.Binding
		for _, e := range km.entries {
			if e.Group == g && e.Binding.Enabled() && !dialogOnly(e.Action) {
				col = append(col, e.Binding)
			}
		}
		if len(col) > 0 {
			cols = append(cols, col)
		}
	}
	return cols
}

// HelpGroups returns the enabled bindings per group, for a titled help.
func (km *KeyMap) HelpGroups() []GroupHelp {
	var out []GroupHelp
	for _, g := range Groups {
		gh := GroupHelp{Group: g}
		for _, e := range km.entries {
			if e.Group == g && e.Binding.Enabled() && !dialogOnly(e.Action) && len(e.Binding.Keys()) > 0 {
				gh.Bindings = append(gh.Bindings, e.Binding)
			}
		}
		if len(gh.Bindings) > 0 {
			out = append(out, gh)
		}
	}
	return out
}

// GroupHelp is one titled column of the help.
type GroupHelp struct {
	Group    Group
	Bindings []key.Binding
}
