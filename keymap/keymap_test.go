package keymap

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
)

func press(s string) tea.KeyPressMsg {
	switch s {
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "ctrl+a":
		return tea.KeyPressMsg{Code: 'a', Mod: tea.ModCtrl}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

func TestDefaultBindings(t *testing.T) {
	t.Parallel()
	km := Default()
	tests := []struct {
		key    string
		action Action
	}{
		{"j", Down}, {"down", Down}, {"k", Up}, {"up", Up},
		{"enter", Open}, {"tab", NextTab}, {"shift+tab", PrevTab},
		{"space", Mark}, {"ctrl+a", MarkAll}, {"A", SelectAll},
		{"r", Retry}, {"c", Cancel}, {"d", Delete}, {"u", Release},
		{"e", Edit}, {"w", RetryInput}, {"b", Bulk}, {"y", Copy}, {"p", Payload},
		{"/", Filter}, {":", Command}, {"?", Help}, {"esc", Back}, {"q", Quit},
		{"y", Confirm},
	}
	for _, tc := range tests {
		if !km.Matches(press(tc.key), tc.action) {
			t.Errorf("key %q does not match %s", tc.key, tc.action)
		}
	}
	if km.Matches(press("A"), SelectAll) == km.Matches(press("a"), SelectAll) {
		t.Error("A and a must differ")
	}
}

func TestReadOnlyDropsDangerous(t *testing.T) {
	t.Parallel()
	km := Default()
	ro := km.ReadOnly()
	for _, e := range km.Entries() {
		if e.Dangerous == ro.Enabled(e.Action) {
			t.Errorf("%s: dangerous=%v but enabled in read-only=%v", e.Action, e.Dangerous, ro.Enabled(e.Action))
		}
	}
	for _, a := range []Action{Retry, Cancel, Delete, Release, Edit, RetryInput, Bulk, Pause} {
		if !km.Dangerous(a) {
			t.Errorf("%s should be dangerous", a)
		}
		if ro.Matches(press(km.B(a).Keys()[0]), a) {
			t.Errorf("%s still matches in read-only mode", a)
		}
	}
	// Help has none of them.
	for _, col := range ro.FullHelp() {
		for _, b := range col {
			for _, a := range []string{"retry", "cancel", "delete", "bulk from filter"} {
				if b.Help().Desc == a {
					t.Errorf("read-only help lists %q", a)
				}
			}
		}
	}
	// The original is untouched.
	if !km.Enabled(Retry) {
		t.Error("ReadOnly changed the map it was called on")
	}
}

func TestHelpFromKeymap(t *testing.T) {
	t.Parallel()
	km := Default()
	var descs []string
	for _, g := range km.HelpGroups() {
		for _, b := range g.Bindings {
			descs = append(descs, b.Help().Desc)
		}
	}
	for _, want := range []string{"retry", "mark", "filter", "help", "quit", "select all matching", "copy id"} {
		if !slices.Contains(descs, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if slices.Contains(descs, "confirm") {
		t.Error("help lists the dialog-only confirm key")
	}
}

func TestLoadOverrides(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(path, []byte("retry: R\ndown: [j, down, ctrl+n]\ndelete: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	km, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if km.Matches(press("r"), Retry) || !km.Matches(press("R"), Retry) {
		t.Error("retry not rebound to R")
	}
	if km.B(Retry).Help().Key != "R" {
		t.Errorf("help key = %q, want R", km.B(Retry).Help().Key)
	}
	if km.Enabled(Delete) {
		t.Error("delete not unbound")
	}
	if !km.Matches(tea.KeyPressMsg{Code: 'n', Mod: tea.ModCtrl}, Down) {
		t.Error("ctrl+n not added to down")
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, want string }{
		{"unknown action", `{"retri": "x"}`, `line 1: unknown action "retri" (did you mean "retry"?)`},
		{"unknown action far from any", "# mine\nfrobnicate: x\n", `line 2: unknown action "frobnicate"; actions: up, down,`},
		{"not a mapping", `retry = R`, "line 1: want a mapping of action to keys"},
		{"config.yaml's section whole", "keys:\n  retry: R\n", `line 1: unknown action "keys": a keys file holds the actions at its top level`},
		{"not YAML", `{"retry": "R"`, "yaml: line 1"},
		{"conflict", "cancel: C\nretry: d\n", `line 2: key "d" is bound to both "retry" and "delete"`},
		{"empty key", `{"retry": ""}`, `line 1: retry: empty key`},
		{"empty key in a list", "down:\n  - j\n  - ' '\n", `line 3: down: empty key`},
		{"bad type", `{"retry": true}`, "line 1: retry: want a key or a list of keys"},
		{"no key", "retry:\n", "line 1: retry: want a key or a list of keys"},
		{"a mapping for keys", "retry: {key: R}\n", "line 1: retry: want a key"},
		{"given twice", `{"retry": "R", "retry": "x"}`, `line 1: action "retry" given twice (first on line 1)`},
		{"unknown modifier", "down: [j, ctlr+n]\n", `line 1: down: key "ctlr+n": unknown modifier "ctlr" (did you mean "ctrl"?)`},
		{"modifiers out of order", "down: shift+ctrl+n\n", `key "shift+ctrl+n": give each modifier once, in the order ctrl+alt+shift+meta+hyper+super`},
		{"unknown key name", "page_down: ctrl+pgdn\n", `key "ctrl+pgdn": unknown key name "pgdn" (did you mean "pgdown"?)`},
		{"not a key", "retry: return-key\n", `key "return-key": want one character or a key name`},
		{"nothing after the modifier", "retry: ctrl+\n", `key "ctrl+": no key after the modifiers`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "keys.yaml")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "key bindings "+path+": ") {
				t.Errorf("err = %v, want it to begin with the file", err)
			}
		})
	}
}

// TestKeysAccepted: the keys a press can match pass the checks.
func TestKeysAccepted(t *testing.T) {
	t.Parallel()
	for _, k := range []string{
		"R", "?", "+", "ctrl++", "é", "1", "space", "pgdown", "f1", "f63", "shift+tab",
		"ctrl+alt+shift+meta+hyper+super+x", "ctrl+[", "alt+enter", "isolevel3shift",
	} {
		if err := checkKey(k); err != nil {
			t.Errorf("checkKey(%q) = %v", k, err)
		}
	}
	for _, k := range []string{"f0", "f64", "f01", "fx", " ", "ctrl+ ", "ctrl+ctrl+a", "Enter"} {
		if err := checkKey(k); err == nil {
			t.Errorf("checkKey(%q) accepts it", k)
		}
	}
}

// TestOneFormat: the same overrides written as YAML, as JSON (a keys.json
// of old, tab-indented or not) and with a number for a key make the same
// bindings.
func TestOneFormat(t *testing.T) {
	t.Parallel()
	forms := map[string]string{
		"yaml":        "retry: R\ndown: [j, down, ctrl+n]\ndelete: []\ncopy: 1\n",
		"yaml blocks": "# mine\nretry: 'R'\ndown:\n  - j\n  - down\n  - ctrl+n\ndelete: []\ncopy: \"1\"\n",
		"json":        `{"retry": "R", "down": ["j", "down", "ctrl+n"], "delete": [], "copy": 1}`,
		"json, tabs":  "{\n\t\"retry\": \"R\",\n\t\"down\": [\"j\", \"down\", \"ctrl+n\"],\n\t\"delete\": [],\n\t\"copy\": \"1\"\n}\n",
	}
	var want []string
	for name, body := range forms {
		o, err := Parse("test", []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		km, err := Build(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := describe(km)
		if want == nil {
			want = got
			if !slices.Contains(got, "retry R (R)") || !slices.Contains(got, "delete - () disabled") || !slices.Contains(got, "copy 1 (1)") {
				t.Fatalf("%s: %v", name, got)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s makes other bindings:\n%v\nwant\n%v", name, got, want)
		}
	}
}

// describe is every binding of km as text, to compare two maps.
func describe(km *KeyMap) []string {
	var out []string
	for _, e := range km.Entries() {
		keys := strings.Join(e.Binding.Keys(), ",")
		if keys == "" {
			keys = "-"
		}
		line := fmt.Sprintf("%s %s (%s)", e.Action, keys, e.Binding.Help().Key)
		if !km.Enabled(e.Action) {
			line += " disabled"
		}
		out = append(out, line)
	}
	return out
}

func TestLoadMissingFileIsDefault(t *testing.T) {
	t.Parallel()
	km, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if err != nil || !km.Enabled(Retry) {
		t.Fatalf("Load(missing) = %v, %v", km, err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Parallel()
	env := map[string]string{"XDG_CONFIG_HOME": "/nonexistent/x", "HOME": "/nonexistent/home/m"}
	if got := DefaultPath(func(k string) string { return env[k] }); got != "/nonexistent/x/sluice/keys.yaml" {
		t.Errorf("got %q", got)
	}
	delete(env, "XDG_CONFIG_HOME")
	if got := DefaultPath(func(k string) string { return env[k] }); got != "/nonexistent/home/m/.config/sluice/keys.yaml" {
		t.Errorf("got %q", got)
	}
	// keys.json, the earlier name, is read while there is no keys.yaml.
	dir := t.TempDir()
	getenv := func(k string) string { return map[string]string{"XDG_CONFIG_HOME": dir}[k] }
	if err := os.MkdirAll(filepath.Join(dir, "sluice"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{"keys.json", "keys.json"},
		{"keys.yaml", "keys.yaml"}, // both: keys.yaml
	} {
		if err := os.WriteFile(filepath.Join(dir, "sluice", tc.file), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := DefaultPath(getenv); got != filepath.Join(dir, "sluice", tc.want) {
			t.Errorf("with %s: got %q, want %s", tc.file, got, tc.want)
		}
	}
}

func TestBuildLayers(t *testing.T) {
	t.Parallel()
	parse := func(source, body string) Overrides {
		t.Helper()
		o, err := Parse(source, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	// The second layer wins for retry; the first frees "d", which the
	// second may then take: conflicts are judged on the result.
	km, err := Build(
		parse("config.yaml", `{"retry": "R", "delete": "D"}`),
		parse("keys.yaml", `{"retry": "x", "cancel": "d"}`),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !km.Matches(press("x"), Retry) || km.Matches(press("R"), Retry) {
		t.Error("the later layer does not win for retry")
	}
	if !km.Matches(press("D"), Delete) || !km.Matches(press("d"), Cancel) {
		t.Error("delete or cancel not rebound")
	}
	// A conflict is named where it was made: the later of the two
	// overrides, in its layer.
	tests := []struct {
		name   string
		layers []Overrides
		want   string
	}{
		{"with a default", []Overrides{parse("config.yaml", "retry: d\n"), parse("keys.yaml", "{}")},
			`config.yaml: line 1: key "d" is bound to both "retry" and "delete"`},
		{"across layers", []Overrides{parse("config.yaml", "# x\nretry: x\n"), parse("keys.yaml", "# y\n# z\ncancel: x\n")},
			`keys.yaml: line 3: key "x" is bound to both "retry" and "cancel"`},
		{"in one layer", []Overrides{parse("keys.yaml", "cancel: x\nretry: x\n")},
			`keys.yaml: line 2: key "x" is bound to both "retry" and "cancel"`},
	}
	for _, tc := range tests {
		if _, err := Build(tc.layers...); err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %s", tc.name, err, tc.want)
		}
	}
}

// TestReplayStepKeys: the step keys and the replay key are bound by
// default, replay is dangerous (read-only drops it), and the documented
// override examples (retry on R, cancel on X) still load.
func TestReplayStepKeys(t *testing.T) {
	t.Parallel()
	km := Default()
	if !km.Matches(press("J"), StepDown) || !km.Matches(press("K"), StepUp) || !km.Matches(press("F"), ReplayStep) {
		t.Fatal("J, K, F not bound to step_down, step_up, replay_step")
	}
	if !km.Dangerous(ReplayStep) || km.ReadOnly().Enabled(ReplayStep) {
		t.Fatal("replay_step survives read-only mode")
	}
	documented, err := Parse("test", []byte("retry: R\ncancel: X\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(documented); err != nil {
		t.Fatalf("the documented overrides conflict: %v", err)
	}
	// The replay preview's replacement result: e, shared with edit (it is
	// read only in that dialog), dropped by read-only, not in the help.
	if !km.Matches(press("e"), ReplayResult) || !km.Dangerous(ReplayResult) || km.ReadOnly().Enabled(ReplayResult) {
		t.Fatal("replay_result is not e, or survives read-only mode")
	}
	for _, g := range km.HelpGroups() {
		for _, b := range g.Bindings {
			if b.Help().Desc == km.B(ReplayResult).Help().Desc {
				t.Fatal("the help lists replay_result, a key of the replay preview only")
			}
			if b.Help().Desc == km.B(BulkStart).Help().Desc {
				t.Fatal("the help lists bulk_start, a key of the bulk preview only")
			}
		}
	}
	// The bulk preview's start field: @, dropped by read-only.
	if !km.Matches(press("@"), BulkStart) || !km.Dangerous(BulkStart) || km.ReadOnly().Enabled(BulkStart) {
		t.Fatal("bulk_start is not @, or survives read-only mode")
	}
}
