package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/keymap"
)

func init() {
	// The tests of this package never read the config file of whoever
	// runs them: the default location is a folder that does not exist.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(os.TempDir(), "sluice-cli-tests-no-config"))
}

// writeConfig writes a config file into a temporary folder and returns
// its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// prepared builds the command tree over the environment env, finds the
// command args name, parses its flags and resolves its settings as the
// root does before running it.
func prepared(t *testing.T, env map[string]string, args ...string) (*settingsProbe, error) {
	t.Helper()
	root := newRootEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	// Execute adds these two; Find needs them now.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Fatalf("find %v: %v", args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("flags %v: %v", rest, err)
	}
	cmd.SetContext(context.Background())
	if err := root.PersistentPreRunE(cmd, nil); err != nil {
		return nil, err
	}
	return &settingsProbe{t: t, ctx: cmd.Context(), get: func(name string) string {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			t.Fatalf("%s has no flag --%s", cmd.CommandPath(), name)
		}
		return f.Value.String()
	}}, nil
}

type settingsProbe struct {
	t   *testing.T
	ctx context.Context // the command's context after the root ran
	get func(flag string) string
}

func TestSettingsPrecedence(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, `
store: sqlite://top.db
log-level: warn
output: json
concurrency: 7
tokens: /etc/sluice/tokens
state: completed
worker:
  queues: [billing, email]
  store: sqlite://worker.db
serve:
  listen: 127.0.0.1:9999
jobs:
  output: table
  api: http://jobs.example:8080
  list:
    output: json
tui:
  theme: light
`)
	withFile := func(env map[string]string) map[string]string {
		out := map[string]string{"SLUICE_CONFIG": file}
		for k, v := range env {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		want  map[string]string // flag → value
		noCfg bool              // run without the config file
	}{
		{"defaults without a file", nil, []string{"worker"},
			map[string]string{"store": "sqlite://sluice.db", "concurrency": "10", "log-level": "info", "queues": ""}, true},
		{"file: top level and the command's section", nil, []string{"worker"},
			map[string]string{"store": "sqlite://worker.db", "concurrency": "7", "log-level": "warn", "queues": "billing,email"}, false},
		{"environment beats file", map[string]string{"SLUICE_STORE": "sqlite://env.db", "SLUICE_CONCURRENCY": "3", "SLUICE_LOG_LEVEL": "debug"}, []string{"worker"},
			map[string]string{"store": "sqlite://env.db", "concurrency": "3", "log-level": "debug"}, false},
		{"flag beats environment and file", map[string]string{"SLUICE_STORE": "sqlite://env.db", "SLUICE_CONCURRENCY": "3"},
			[]string{"worker", "--store", "sqlite://flag.db", "--concurrency", "9", "--log-level", "error"},
			map[string]string{"store": "sqlite://flag.db", "concurrency": "9", "log-level": "error"}, false},
		{"empty variable counts as unset", map[string]string{"SLUICE_STORE": ""}, []string{"worker"},
			map[string]string{"store": "sqlite://worker.db"}, false},
		{"serve: section and top level", nil, []string{"serve"},
			map[string]string{"listen": "127.0.0.1:9999", "store": "sqlite://top.db", "tokens": "/etc/sluice/tokens"}, false},
		{"serve: SLUICE_TOKENS is not a tokens file", map[string]string{"SLUICE_TOKENS": "a:admin:0123456789abcdef0123", "SLUICE_LISTEN": "127.0.0.1:1"}, []string{"serve"},
			map[string]string{"tokens": "/etc/sluice/tokens", "listen": "127.0.0.1:1"}, false},
		{"serve: bool from the environment", map[string]string{"SLUICE_READ_ONLY": "true"}, []string{"serve"},
			map[string]string{"read-only": "true"}, false},
		{"jobs list: deepest section wins; api beats the top level's store", nil, []string{"jobs", "list"},
			map[string]string{"output": "json", "api": "http://jobs.example:8080", "store": ""}, false},
		{"jobs show: the jobs section", nil, []string{"jobs", "show"},
			map[string]string{"output": "table"}, false},
		{"jobs list: environment beats every section", map[string]string{"SLUICE_OUTPUT": "table"}, []string{"jobs", "list"},
			map[string]string{"output": "table"}, false},
		{"jobs list: -o beats the environment", map[string]string{"SLUICE_OUTPUT": "table"}, []string{"jobs", "list", "-o", "json"},
			map[string]string{"output": "json"}, false},
		{"jobs list: SLUICE_STORE beats the file's api", map[string]string{"SLUICE_STORE": "sqlite://env.db"}, []string{"jobs", "list"},
			map[string]string{"store": "sqlite://env.db", "api": ""}, false},
		{"jobs list: --api beats SLUICE_STORE", map[string]string{"SLUICE_STORE": "sqlite://env.db"}, []string{"jobs", "list", "--api", "http://flag:1"},
			map[string]string{"store": "", "api": "http://flag:1"}, false},
		{"jobs list: selector flags never come from elsewhere", map[string]string{"SLUICE_STATE": "archived", "SLUICE_LIMIT": "3"}, []string{"jobs", "list"},
			map[string]string{"state": "[]", "limit": "50"}, false},
		{"queues list: top level store with no section", nil, []string{"queues", "list"},
			map[string]string{"store": "sqlite://top.db", "output": "json"}, false},
		{"tui: state is a setting of the console", nil, []string{"tui"},
			map[string]string{"state": "completed", "theme": "light", "store": "sqlite://top.db"}, false},
		{"tui: token from the environment", map[string]string{"SLUICE_TOKEN": "t0k3n", "SLUICE_STATE": "running"}, []string{"tui"},
			map[string]string{"token": "t0k3n", "state": "running"}, false},
		{"migrate: store", map[string]string{"SLUICE_STORE": "sqlite://m.db"}, []string{"migrate"},
			map[string]string{"store": "sqlite://m.db"}, false},
		{"bench takes nothing (its store is named on the command line)", map[string]string{"SLUICE_STORE": "sqlite://precious.db"}, []string{"bench"},
			map[string]string{"store": "", "concurrency": "50"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := withFile(tc.env)
			if tc.noCfg {
				env = tc.env
			}
			p, err := prepared(t, env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			for flag, want := range tc.want {
				if got := p.get(flag); got != want {
					t.Errorf("--%s = %q, want %q", flag, got, want)
				}
			}
		})
	}
}

func TestConfigFileLocation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sluice"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sluice", "config.yaml"), []byte("store: sqlite://xdg.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := writeConfig(t, "store: sqlite://named.db\n")
	third := writeConfig(t, "store: sqlite://flag.db\n")
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".config", "sluice"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "sluice", "config.yaml"), []byte("store: sqlite://home.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": dir}, nil, "sqlite://xdg.db"},
		{"HOME/.config without XDG_CONFIG_HOME", map[string]string{"HOME": home}, nil, "sqlite://home.db"},
		{"XDG_CONFIG_HOME beats HOME", map[string]string{"HOME": home, "XDG_CONFIG_HOME": dir}, nil, "sqlite://xdg.db"},
		{"no file at the default location", map[string]string{"XDG_CONFIG_HOME": empty}, nil, "sqlite://sluice.db"},
		{"SLUICE_CONFIG", map[string]string{"XDG_CONFIG_HOME": dir, "SLUICE_CONFIG": other}, nil, "sqlite://named.db"},
		{"--config beats SLUICE_CONFIG", map[string]string{"XDG_CONFIG_HOME": dir, "SLUICE_CONFIG": other}, []string{"--config", third}, "sqlite://flag.db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := prepared(t, tc.env, append([]string{"worker"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.get("store"); got != tc.want {
				t.Errorf("--store = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := prepared(t, map[string]string{"SLUICE_CONFIG": filepath.Join(empty, "none.yaml")}, "worker"); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("a named config file that is missing: err = %v", err)
	}
}

func TestConfigFileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, want string }{
		{"unknown key", "stor: sqlite://x.db\n", `line 1: unknown key "stor" (did you mean "store"?)`},
		{"unknown key in a section", "jobs:\n  list:\n    outptu: json\n", `line 3: unknown key "jobs.list.outptu" (did you mean "output"?)`},
		{"unknown section", "jbos:\n  output: json\n", `unknown key "jbos" (did you mean "jobs"?)`},
		{"key of another command", "worker:\n  listen: x\n", `unknown key "worker.listen"`},
		{"command line only", "jobs:\n  yes: true\n", `jobs.yes: --yes is given on the command line only`},
		{"selector of the operator commands", "jobs:\n  state: archived\n", `--state is given on the command line only`},
		{"a mapping for a value", "store:\n  url: x\n", "store: want a value, not a mapping"},
		{"given twice", "store: a\nstore: b\n", `key "store" given twice`},
		{"not a mapping", "- store\n", "want a mapping of settings"},
		{"not YAML", "store: [\n", "config file"},
		{"bad value", "worker:\n  concurrency: many\n", `(worker.concurrency): --concurrency "many"`},
		{"unknown action", "keys:\n  retri: R\n", `line 2: unknown action "retri" (did you mean "retry"?)`},
		{"key conflict", "keys:\n  retry: d\n", `key "d" is bound to both "retry" and "delete"`},
		{"keys below the top", "tui:\n  keys:\n    retry: R\n", "key bindings go in the keys section at the top level"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.body)
			_, err := prepared(t, map[string]string{"SLUICE_CONFIG": path}, "worker")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %s", err, tc.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want it to name the file", err)
			}
		})
	}
	// Empty files and comments are fine; a bad variable names itself.
	for _, body := range []string{"", "# nothing yet\n", "store:\n"} {
		if _, err := prepared(t, map[string]string{"SLUICE_CONFIG": writeConfig(t, body)}, "worker"); err != nil {
			t.Errorf("config %q: %v", body, err)
		}
	}
	if _, err := prepared(t, map[string]string{"SLUICE_CONCURRENCY": "lots"}, "worker"); err == nil || !strings.Contains(err.Error(), "SLUICE_CONCURRENCY") {
		t.Errorf("bad variable: err = %v", err)
	}
	// A broken file does not stop help or completion.
	env := map[string]string{"SLUICE_CONFIG": writeConfig(t, "stor: x\n")}
	for _, args := range [][]string{{"completion", "bash"}, {"help"}, {"config", "path"}} {
		if _, err := prepared(t, env, args...); err != nil {
			t.Errorf("%v with a broken config file: %v", args, err)
		}
	}
}

// TestConfigFileKeyBindings: the keys section and the keys file (here a
// keys.json, read as YAML) make one keymap, the file winning for the
// actions it names.
func TestConfigFileKeyBindings(t *testing.T) {
	t.Parallel()
	root := newRootEnv(func(string) (string, bool) { return "", false }, nil)
	cfg, err := parseConfig(root, "config.yaml", []byte("keys:\n  retry: R\n  cancel: X\n  delete: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, []byte(`{"cancel": "C"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), configKey{}, cfg)
	km, err := loadKeyMap(ctx, keysFile)
	if err != nil {
		t.Fatal(err)
	}
	press := func(s string) tea.KeyPressMsg { return tea.KeyPressMsg{Code: rune(s[0]), Text: s} }
	if !km.Matches(press("R"), keymap.Retry) || km.Matches(press("r"), keymap.Retry) {
		t.Error("retry not rebound to R by the config file")
	}
	if !km.Matches(press("C"), keymap.Cancel) || km.Matches(press("X"), keymap.Cancel) {
		t.Error("keys.json does not win for cancel")
	}
	if km.Enabled(keymap.Delete) {
		t.Error("delete not unbound")
	}
	// The root hands the file to the console through the command's
	// context.
	p, err := prepared(t, map[string]string{"SLUICE_CONFIG": writeConfig(t, "keys:\n  retry: R\n")}, "tui")
	if err != nil {
		t.Fatal(err)
	}
	if km, err := loadKeyMap(p.ctx, ""); err != nil || !km.Matches(press("R"), keymap.Retry) {
		t.Fatalf("tui's context lacks the config file's keys: %v", err)
	}
	// Without a keys file the config file's bindings stand alone.
	km, err = loadKeyMap(ctx, filepath.Join(t.TempDir(), "missing.json"))
	if err != nil || !km.Matches(press("X"), keymap.Cancel) {
		t.Fatalf("no keys file: %v", err)
	}
}

// TestKeyOverridesOneFormat: the same overrides in config.yaml's keys
// section and in a keys file (YAML, or JSON when given) make the same
// bindings, and the same mistake is the same error, at the same line,
// after the name of the file. The keys file's first line is a comment so
// that its lines are those of the section.
func TestKeyOverridesOneFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []string // the section's lines, unindented
		json    string   // the same as a keys.json, when it can be
		wantErr string
	}{
		{name: "rebound", entries: []string{"retry: R", "cancel: X"}, json: `{"retry": "R", "cancel": "X"}`},
		{name: "lists and unbinding", entries: []string{"down: [j, down, ctrl+n]", "delete: []"}, json: `{"down": ["j", "down", "ctrl+n"], "delete": []}`},
		{name: "a block list", entries: []string{"down:", "  - j", "  - ctrl+n"}, json: `{"down": ["j", "ctrl+n"]}`},
		{name: "quoted punctuation and a digit", entries: []string{`help: "?"`, `command: ";"`, "copy: 1"}, json: `{"help": "?", "command": ";", "copy": "1"}`},
		{name: "nothing", entries: []string{"{}"}, json: `{}`},

		{name: "unknown action", entries: []string{"retri: R"}, wantErr: `line 2: unknown action "retri" (did you mean "retry"?)`},
		{name: "bad modifier", entries: []string{"down: [j, ctlr+n]"}, wantErr: `line 2: down: key "ctlr+n": unknown modifier "ctlr" (did you mean "ctrl"?)`},
		{name: "bad key name", entries: []string{"down:", "  - j", "  - Down"}, wantErr: `line 4: down: key "Down": unknown key name "Down" (did you mean "down"?)`},
		{name: "empty key", entries: []string{"retry: ''"}, wantErr: `line 2: retry: empty key`},
		{name: "not keys", entries: []string{"retry: {key: R}"}, wantErr: `line 2: retry: want a key or a list of keys`},
		{name: "given twice", entries: []string{"retry: R", "retry: x"}, wantErr: `line 3: action "retry" given twice (first on line 2)`},
		{name: "bound twice", entries: []string{"cancel: C", "retry: d"}, wantErr: `line 3: key "d" is bound to both "retry" and "delete"`},
	}
	root := newRootEnv(func(string) (string, bool) { return "", false }, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			section := "keys:\n"
			if tc.entries[0] == "{}" {
				section = "keys: {}\n"
			} else {
				for _, e := range tc.entries {
					section += "  " + e + "\n"
				}
			}
			configPath := filepath.Join(dir, "config.yaml")
			cfg, cfgErr := parseConfig(root, configPath, []byte(section))
			var fromConfig *keymap.KeyMap
			if cfgErr == nil {
				fromConfig, cfgErr = loadKeyMap(context.WithValue(context.Background(), configKey{}, cfg), "")
			}
			keysPath := filepath.Join(dir, "keys.yaml")
			if err := os.WriteFile(keysPath, []byte("# the console's keys\n"+strings.Join(tc.entries, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			fromFile, fileErr := loadKeyMap(context.Background(), keysPath)

			if tc.wantErr != "" {
				if cfgErr == nil || fileErr == nil {
					t.Fatalf("config: %v; keys file: %v; want both to fail", cfgErr, fileErr)
				}
				inConfig, ok1 := strings.CutPrefix(cfgErr.Error(), "config file "+configPath+": ")
				inFile, ok2 := strings.CutPrefix(fileErr.Error(), "key bindings "+keysPath+": ")
				if !ok1 || !ok2 {
					t.Fatalf("the errors do not begin with their file:\n%v\n%v", cfgErr, fileErr)
				}
				if inConfig != inFile || !strings.HasPrefix(inConfig, tc.wantErr) {
					t.Fatalf("config: %s\nkeys file: %s\nwant both %s", inConfig, inFile, tc.wantErr)
				}
				return
			}
			if cfgErr != nil || fileErr != nil {
				t.Fatalf("config: %v; keys file: %v", cfgErr, fileErr)
			}
			want := bindings(fromConfig)
			if slices.Equal(want, bindings(keymap.Default())) && tc.name != "nothing" {
				t.Fatal("the overrides changed nothing")
			}
			if got := bindings(fromFile); !slices.Equal(got, want) {
				t.Errorf("keys file:\n%v\nconfig:\n%v", got, want)
			}
			jsonPath := filepath.Join(dir, "keys.json")
			if err := os.WriteFile(jsonPath, []byte(tc.json), 0o600); err != nil {
				t.Fatal(err)
			}
			fromJSON, err := loadKeyMap(context.Background(), jsonPath)
			if err != nil {
				t.Fatal(err)
			}
			if got := bindings(fromJSON); !slices.Equal(got, want) {
				t.Errorf("keys.json:\n%v\nconfig:\n%v", got, want)
			}
		})
	}
}

// bindings is every binding of km as text: action, keys, help key and
// whether it is enabled.
func bindings(km *keymap.KeyMap) []string {
	var out []string
	for _, e := range km.Entries() {
		out = append(out, fmt.Sprintf("%s %q %q %v", e.Action, e.Binding.Keys(), e.Binding.Help().Key, km.Enabled(e.Action)))
	}
	return out
}

// TestConfigEndToEnd runs real commands on a SQLite file named by the
// config file, with a setting from the environment on top.
func TestConfigEndToEnd(t *testing.T) {
	path := deadStore(t, 3, 2)
	cfg := writeConfig(t, "store: sqlite://"+path+"\noutput: json\n")
	t.Setenv("SLUICE_STORE", "")
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_OUTPUT", "")

	code, out, stderr := runCLI(t, "", "--config", cfg, "jobs", "list", "--state", "archived")
	var page engine.JobPage
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Jobs) != 5 {
		t.Fatalf("jobs list from the config file: exit %d %s %s", code, out, stderr)
	}
	t.Setenv("SLUICE_OUTPUT", "table")
	if code, out, stderr = runCLI(t, "", "--config", cfg, "jobs", "list", "--state", "archived"); code != 0 || !strings.HasPrefix(out, "ID") {
		t.Fatalf("SLUICE_OUTPUT over the file: exit %d %s %s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", "--config", cfg, "config", "show", "jobs", "list"); code != 0 ||
		!strings.Contains(out, "SLUICE_OUTPUT") || !strings.Contains(out, cfg+" line 1 (store)") {
		t.Fatalf("config show: exit %d %s %s", code, out, stderr)
	}
	if code, out, _ = runCLI(t, "", "--config", cfg, "config", "path"); code != 0 || strings.TrimSpace(out) != cfg {
		t.Fatalf("config path: %s", out)
	}
	t.Setenv("SLUICE_TOKEN", "secret-token-0123456789")
	if code, out, _ = runCLI(t, "", "config", "show", "tui"); code != 0 || strings.Contains(out, "secret-token") || !strings.Contains(out, "(set)") {
		t.Fatalf("config show prints the token: %s", out)
	}
}
