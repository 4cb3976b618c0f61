package keymap

// The user's overrides have one format, read by one parser: a YAML mapping
// from action name to a key or a list of keys, an empty list unbinding the
// action,
//
//	retry: R
//	down: [j, down, ctrl+n]
//	delete: []
//
// Both the keys file (keys.yaml; JSON is YAML, so a keys.json file of
// {"retry": "R"} reads as it is) and the keys section of config.yaml are
// in it.
// Every mistake in either is refused with the line it is on: an unknown
// action or key name (with the name most likely meant), a modifier out of
// order, an action given twice, one key bound to two actions.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/suggest"
)

// Overrides is one layer of the user's overrides, parsed and checked.
type Overrides struct {
	// Source names the layer in Build's errors, as
	// "key bindings /home/maya/.config/sluice/keys.yaml".
	Source string
	binds  []rebind
}

// rebind is one action's new keys (none: unbound) and the line that gives
// them.
type rebind struct {
	action Action
	keys   []string
	line   int
}

// DefaultPath is the keys file read when none is named: keys.yaml in
// $XDG_CONFIG_HOME/sluice, else in ~/.config/sluice; keys.json there when
// only it exists, the file's earlier name, read as it is (JSON is YAML).
// "" without either variable.
func DefaultPath(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	path := filepath.Join(dir, "sluice", "keys.yaml")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		legacy := filepath.Join(dir, "sluice", "keys.json")
		if _, err := os.Stat(legacy); err == nil {
			return legacy
		}
	}
	return path
}

// Load returns the default bindings with the keys file at path applied
// (a missing file, or no path, leaves them as they are).
func Load(path string) (*KeyMap, error) {
	if path == "" {
		return Default(), nil
	}
	o, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Build(o)
}

// ReadFile reads the keys file at path; a missing file overrides nothing.
// Its errors, and Build's of it, begin "key bindings PATH".
func ReadFile(path string) (Overrides, error) {
	source := "key bindings " + path
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Overrides{Source: source}, nil
	}
	if err != nil {
		return Overrides{}, fmt.Errorf("%s: %w", source, err)
	}
	o, err := Parse(source, b)
	if err != nil {
		return Overrides{}, fmt.Errorf("%s: %w", source, err)
	}
	return o, nil
}

// Parse reads overrides from a document in their format; an empty one
// overrides nothing. source becomes the Overrides' Source; Parse's errors
// name the line and leave naming the file to the caller, as the config
// file's other errors do.
func Parse(source string, data []byte) (Overrides, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Overrides{}, err
	}
	if len(doc.Content) == 0 {
		return Overrides{Source: source}, nil
	}
	return ParseNode(source, doc.Content[0])
}

// ParseNode reads overrides from a YAML node: a keys file's document, or
// the keys section of config.yaml, whose lines its errors then give. A
// null node (a section with nothing in it) overrides nothing.
func ParseNode(source string, node *yaml.Node) (Overrides, error) {
	o := Overrides{Source: source}
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return o, nil
	}
	if node.Kind != yaml.MappingNode {
		return Overrides{}, lineErrorf(node.Line, "want a mapping of action to keys, as retry: R or down: [j, down]")
	}
	names := make([]string, len(defaults))
	for i, d := range defaults {
		names[i] = string(d.a)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		name := k.Value
		if !slices.Contains(names, name) {
			if name == "keys" && v.Kind == yaml.MappingNode {
				// config.yaml's section copied whole into a keys file.
				return Overrides{}, lineErrorf(k.Line, `unknown action "keys": a keys file holds the actions at its top level (retry: R), what config.yaml holds under keys:`)
			}
			if s := suggest.Closest(name, names); s != "" {
				return Overrides{}, lineErrorf(k.Line, "unknown action %q (did you mean %q?)", name, s)
			}
			return Overrides{}, lineErrorf(k.Line, "unknown action %q; actions: %s", name, strings.Join(names, ", "))
		}
		if first, ok := seen[name]; ok {
			return Overrides{}, lineErrorf(k.Line, "action %q given twice (first on line %d)", name, first)
		}
		seen[name] = k.Line
		keys, err := parseKeys(name, v)
		if err != nil {
			return Overrides{}, err
		}
		o.binds = append(o.binds, rebind{action: Action(name), keys: keys, line: k.Line})
	}
	return o, nil
}

// lineErrorf is an error at a line of the overrides.
func lineErrorf(line int, format string, args ...any) error {
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}

// wantKeys says what an action's value may be.
const wantKeys = "want a key or a list of keys, as R or [r, ctrl+r] ([] unbinds it)"

// parseKeys reads an action's keys: one key, or a list (empty: unbound).
func parseKeys(action string, v *yaml.Node) ([]string, error) {
	var items []*yaml.Node
	switch v.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{v}
	case yaml.SequenceNode:
		items = v.Content
	default:
		return nil, lineErrorf(v.Line, "%s: %s", action, wantKeys)
	}
	keys := make([]string, 0, len(items))
	for _, it := range items {
		// A key is text or a number ("1"); anything else, null among
		// them ("retry:" with nothing after it), is no key.
		if it.Kind != yaml.ScalarNode || (it.Tag != "!!str" && it.Tag != "!!int") {
			return nil, lineErrorf(it.Line, "%s: %s", action, wantKeys)
		}
		if err := checkKey(it.Value); err != nil {
			return nil, lineErrorf(it.Line, "%s: %v", action, err)
		}
		keys = append(keys, it.Value)
	}
	return keys, nil
}

// modifiers are the modifiers a key may carry, in the order the terminal
// library writes them: a key written in another order matches no press.
var modifiers = []string{"ctrl", "alt", "shift", "meta", "hyper", "super"}

// keyNames are the names of the keys that are not one character, as the
// terminal library writes them (f1 to f63 besides).
var keyNames = []string{
	"enter", "tab", "backspace", "esc", "space", "up", "down", "left", "right",
	"begin", "find", "insert", "delete", "select", "pgdown", "pgup", "home", "end",
	"equal", "mul", "plus", "comma", "minus", "period", "div", "sep",
	"capslock", "scrolllock", "numlock", "printscreen", "pause", "menu",
	"mediaplay", "mediapause", "mediaplaypause", "mediareverse", "mediastop",
	"mediafastforward", "mediarewind", "medianext", "mediaprev", "mediarecord",
	"lowervol", "raisevol", "mute",
	"leftshift", "leftalt", "leftctrl", "leftsuper", "lefthyper", "leftmeta",
	"rightshift", "rightalt", "rightctrl", "rightsuper", "righthyper", "rightmeta",
	"isolevel3shift", "isolevel5shift",
}

// checkKey refuses a key no press can match: empty, an unknown modifier or
// one out of order, an unknown key name.
func checkKey(k string) error {
	if strings.TrimSpace(k) == "" {
		return errors.New("empty key")
	}
	mods, base := splitKey(k)
	last := -1
	for _, m := range mods {
		i := slices.Index(modifiers, m)
		if i < 0 {
			if s := suggest.Closest(m, modifiers); s != "" {
				return fmt.Errorf("key %q: unknown modifier %q (did you mean %q?)", k, m, s)
			}
			return fmt.Errorf("key %q: unknown modifier %q; modifiers: %s", k, m, strings.Join(modifiers, ", "))
		}
		if i <= last {
			return fmt.Errorf("key %q: give each modifier once, in the order %s", k, strings.Join(modifiers, "+"))
		}
		last = i
	}
	if r, n := utf8.DecodeRuneInString(base); n > 0 && n == len(base) {
		if unicode.IsSpace(r) {
			return fmt.Errorf("key %q: the space bar is space", k)
		}
		return nil
	}
	if base == "" {
		return fmt.Errorf("key %q: no key after the modifiers", k)
	}
	if isKeyName(base) {
		return nil
	}
	if s := suggest.Closest(base, keyNames); s != "" {
		return fmt.Errorf("key %q: unknown key name %q (did you mean %q?)", k, base, s)
	}
	return fmt.Errorf("key %q: want one character or a key name, as enter, esc, space, tab, up, pgdown or f1", k)
}

// splitKey splits "ctrl+shift+a" into its modifiers and its key; "+" and
// "ctrl++" are the plus key.
func splitKey(k string) (mods []string, base string) {
	switch {
	case k == "+":
		return nil, "+"
	case strings.HasSuffix(k, "++"):
		return strings.Split(k[:len(k)-2], "+"), "+"
	}
	parts := strings.Split(k, "+")
	return parts[:len(parts)-1], parts[len(parts)-1]
}

// isKeyName reports whether s names a key: one of keyNames, or f1 to f63.
func isKeyName(s string) bool {
	if slices.Contains(keyNames, s) {
		return true
	}
	n, ok := strings.CutPrefix(s, "f")
	if !ok || n == "" || n[0] == '0' {
		return false
	}
	v := 0
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
		v = v*10 + int(c-'0')
	}
	return v >= 1 && v <= 63
}

// Build returns the default bindings with each layer applied in order, a
// later layer winning for the actions it names. Conflicts are checked once,
// on the result, so a layer may move a key another layer freed; a conflict
// is reported at the line that made it, named by its layer's Source.
func Build(layers ...Overrides) (*KeyMap, error) {
	km := Default()
	from := map[Action]origin{}
	for li, l := range layers {
		for _, r := range l.binds {
			b := &km.entries[km.index[r.action]].Binding
			if len(r.keys) == 0 {
				b.Unbind()
			} else {
				b.SetKeys(r.keys...)
				b.SetHelp(strings.Join(r.keys, "/"), b.Help().Desc)
			}
			from[r.action] = origin{layer: li, line: r.line}
		}
	}
	k, a, b, ok := km.conflict()
	if !ok {
		return km, nil
	}
	msg := fmt.Sprintf("key %q is bound to both %q and %q", k, a, b)
	at, ok := later(from, a, b)
	if !ok { // not reached: the defaults have no conflict
		return nil, errors.New(msg)
	}
	if src := layers[at.layer].Source; src != "" {
		return nil, fmt.Errorf("%s: line %d: %s", src, at.line, msg)
	}
	return nil, lineErrorf(at.line, "%s", msg)
}

// origin is where an action's override is: its layer and line.
type origin struct{ layer, line int }

// later is the origin of the later override of a and b: the one that made
// their keys collide.
func later(from map[Action]origin, a, b Action) (origin, bool) {
	oa, okA := from[a]
	ob, okB := from[b]
	switch {
	case !okA:
		return ob, okB
	case !okB:
		return oa, true
	case ob.layer > oa.layer || (ob.layer == oa.layer && ob.line > oa.line):
		return ob, true
	}
	return oa, true
}

// conflict finds one key bound to two actions that are live at the same
// time: the key and the two actions, in help order. Confirm shares "y" with copy, and ReplayResult "e" with edit, on
// purpose: they are only read inside a confirmation, where nothing else
// is.
func (km *KeyMap) conflict() (string, Action, Action, bool) {
	seen := map[string]Action{}
	for _, e := range km.entries {
		if dialogOnly(e.Action) {
			continue
		}
		for _, k := range e.Binding.Keys() {
			if other, ok := seen[k]; ok {
				return k, other, e.Action, true
			}
			seen[k] = e.Action
		}
	}
	return "", "", "", false
}
