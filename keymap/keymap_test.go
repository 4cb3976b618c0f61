package keymap

import (
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
	path := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(path, []byte(`{"retry": "R", "down": ["j", "down", "ctrl+n"], "delete": []}`), 0o600); err != nil {
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
		{"unknown action", `{"retri": "x"}`, "unknown action"},
		{"not json", `retry = R`, "not a JSON object"},
		{"conflict", `{"retry": "d"}`, "bound to both"},
		{"empty key", `{"retry": ""}`, "empty key"},
		{"bad type", `{"retry": 3}`, "want a key name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "keys.json")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestLoadMissingFileIsDefault(t *testing.T) {
	t.Parallel()
	km, err := Load(filepath.Join(t.TempDir(), "none.json"))
	if err != nil || !km.Enabled(Retry) {
		t.Fatalf("Load(missing) = %v, %v", km, err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Parallel()
	env := map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/home/m"}
	if got := DefaultPath(func(k string) string { return env[k] }); got != "/x/sluice/keys.json" {
		t.Errorf("got %q", got)
	}
	delete(env, "XDG_CONFIG_HOME")
	if got := DefaultPath(func(k string) string { return env[k] }); got != "/home/m/.config/sluice/keys.json" {
		t.Errorf("got %q", got)
	}
}

func TestBuildLayers(t *testing.T) {
	t.Parallel()
	// The second layer wins for retry; the first frees "d", which the
	// second may then take: conflicts are judged on the result.
	km, err := Build(
		Overrides{Source: "config.yaml", Data: []byte(`{"retry": "R", "delete": "D"}`)},
		Overrides{Source: "keys.json", Data: []byte(`{"retry": "x", "cancel": "d"}`)},
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
	_, err = Build(
		Overrides{Source: "config.yaml", Data: []byte(`{"retry": "d"}`)},
		Overrides{Source: "keys.json", Data: []byte(`{}`)},
	)
	if err == nil || !strings.Contains(err.Error(), "config.yaml + keys.json") || !strings.Contains(err.Error(), "bound to both") {
		t.Fatalf("conflict err = %v", err)
	}
	_, err = Build(Overrides{Source: "config.yaml", Data: []byte(`{"retri": "x"}`)})
	if err == nil || !strings.Contains(err.Error(), "config.yaml") || !strings.Contains(err.Error(), `"retri"`) {
		t.Fatalf("unknown action err = %v", err)
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
	if _, err := Build(Overrides{Source: "test", Data: []byte(`{"retry": "R", "cancel": "X"}`)}); err != nil {
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
		}
	}
}
