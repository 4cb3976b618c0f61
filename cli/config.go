package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	yaml "go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/suggest"
	"github.com/sluicehq/sluice/keymap"
)

// Settings: a flag that is a setting (not what one invocation acts on) can
// also come from the environment variable SLUICE_<FLAG> (upper case, dashes
// as underscores) and from the config file; a flag given on the command
// line beats the environment, which beats the file, which beats the
// default. The root command resolves them before any command runs.

// configEnv names the config file instead of the default location.
const configEnv = "SLUICE_CONFIG"

// commandLineOnly flags say what one invocation acts on, or confirm it:
// they never come from the environment or the config file.
var commandLineOnly = map[string]bool{
	"help": true, "config": true,
	"yes": true, "force": true, "dry-run": true, "wait": true,
	"payload": true, "id": true, "cursor": true, "limit": true, "rate": true,
}

// commandLineOnlyAnnotation marks one command's flag as command line only
// where its name is a setting elsewhere: jobs export's -o names the file
// one export writes, while the other commands' -o (table or json) is a
// setting, and an "output: json" in the config file must not become a
// file named json.
const commandLineOnlyAnnotation = "sluice-command-line-only"

// selectorFlags pick jobs in the operator commands (command line only
// there); the console's flags of the same names only say what it opens on,
// so they are settings of tui and demo.
var selectorFlags = map[string]bool{"state": true, "queue": true, "kind": true, "query": true}

// envOverride names a flag's variable where SLUICE_<FLAG> means something
// else; "" means none. SLUICE_TOKENS holds the server's tokens themselves,
// not the name of a tokens file (see serve --help).
var envOverride = map[string]string{"tokens": ""}

// exclusiveFlags are flags of which a command takes one: the most specific
// source that sets any of them decides, and what a weaker source says of
// the others is ignored (SLUICE_STORE in the environment does not clash
// with --api on the command line).
var exclusiveFlags = [][]string{{"api", "store"}}

// unconfigured commands take nothing from the environment or the file:
// bench writes jobs to a store, which it must be named on its command
// line; the others have no settings.
var unconfigured = map[string]bool{
	"bench": true, "completion": true, "help": true, "config": true,
	cobra.ShellCompRequestCmd: true, cobra.ShellCompNoDescRequestCmd: true,
}

// envName is the variable a flag may come from, or "".
func envName(flag string) string {
	if v, ok := envOverride[flag]; ok {
		return v
	}
	return "SLUICE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// commandPath is cmd's names below the root: [jobs list].
func commandPath(cmd *cobra.Command) []string {
	var path []string
	for c := cmd; c.HasParent(); c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	return path
}

// isUnconfigured reports whether cmd is, or is under, a command that takes
// no settings.
func isUnconfigured(cmd *cobra.Command) bool {
	for c := cmd; c.HasParent(); c = c.Parent() {
		if unconfigured[c.Name()] {
			return true
		}
	}
	return false
}

// configurable reports whether flag f of cmd may come from the
// environment or the file.
func configurable(cmd *cobra.Command, f *pflag.Flag) bool {
	if commandLineOnly[f.Name] || f.Annotations[commandLineOnlyAnnotation] != nil || f.Hidden || isUnconfigured(cmd) {
		return false
	}
	if selectorFlags[f.Name] {
		p := commandPath(cmd)
		return len(p) > 0 && (p[0] == "tui" || p[0] == "demo")
	}
	return true
}

// allFlags visits every flag of cmd, its own and inherited.
func allFlags(cmd *cobra.Command, fn func(*pflag.Flag)) {
	cmd.InheritedFlags() // merges the parents' persistent flags into Flags
	cmd.Flags().VisitAll(fn)
}

// settings resolves the settings of the command being run.
type settings struct {
	lookupEnv func(string) (string, bool)
	// configFlag is --config.
	configFlag string
}

// env reads a variable; empty counts as unset.
func (s *settings) env(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	v, ok := s.lookupEnv(name)
	return v, ok && v != ""
}

// configPath is the config file to read and whether it was named
// (--config or SLUICE_CONFIG) rather than the default location.
func (s *settings) configPath() (string, bool) {
	if s.configFlag != "" {
		return s.configFlag, true
	}
	if v, ok := s.env(configEnv); ok {
		return v, true
	}
	return defaultConfigPath(s.env), false
}

// defaultConfigPath is $XDG_CONFIG_HOME/sluice/config.yaml, else
// ~/.config/sluice/config.yaml; "" without either variable.
func defaultConfigPath(env func(string) (string, bool)) string {
	dir, ok := env("XDG_CONFIG_HOME")
	if !ok {
		home, ok := env("HOME")
		if !ok {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "sluice", "config.yaml")
}

// prepare loads the config file and resolves cmd's settings into its
// flags; the root runs it before every command.
func (s *settings) prepare(cmd *cobra.Command) error {
	if isUnconfigured(cmd) {
		return nil
	}
	cfg, err := s.load(cmd.Root())
	if err != nil {
		return err
	}
	vals, err := s.resolve(cmd, cfg)
	if err != nil {
		return err
	}
	for _, v := range vals {
		if err := v.apply(); err != nil {
			return err
		}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	cmd.SetContext(context.WithValue(ctx, configKey{}, cfg))
	return nil
}

// load reads the config file; a missing file at the default location is
// an empty config.
func (s *settings) load(root *cobra.Command) (*configFile, error) {
	path, named := s.configPath()
	if path == "" {
		return &configFile{root: &configSection{}}, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !named {
		return &configFile{path: path, root: &configSection{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return parseConfig(root, path, b)
}

// configKey holds the loaded *configFile in a command's context.
type configKey struct{}

func configFrom(ctx context.Context) *configFile {
	cfg, _ := ctx.Value(configKey{}).(*configFile)
	return cfg
}

// configFile is a parsed config file. Its top level holds settings by
// flag name, applying to every command with that flag; a key naming a
// command holds a section for that command and those under it, whose
// settings win over the top level's; keys holds the console's key
// bindings.
type configFile struct {
	path string
	root *configSection
	// keys are the key bindings of the keys section; none when it is
	// absent.
	keys keymap.Overrides
	// exists is false for a default location with no file.
	exists bool
}

type configSection struct {
	values   map[string]*yaml.Node // flag name → scalar or sequence
	sections map[string]*configSection
}

// parseConfig reads a config file's YAML, checking every key against the
// command tree under root: an unknown key is an error naming it.
func parseConfig(root *cobra.Command, path string, data []byte) (*configFile, error) {
	cfg := &configFile{path: path, root: &configSection{}, exists: true}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return cfg, nil // empty file
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return cfg, nil // only comments
	}
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s: line %d: want a mapping of settings, as store: sqlite://sluice.db", path, top.Line)
	}
	if err := cfg.parseSection(root, cfg.root, top, nil); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	// A key bound to two actions is refused here too, not only when the
	// console starts; the error names this file and the line.
	if _, err := keymap.Build(cfg.keys); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (cfg *configFile) parseSection(cmd *cobra.Command, sec *configSection, node *yaml.Node, path []string) error {
	flags := subtreeFlags(cmd)
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		name := k.Value
		key := strings.Join(append(append([]string(nil), path...), name), ".")
		if seen[name] {
			return fmt.Errorf("line %d: key %q given twice", k.Line, key)
		}
		seen[name] = true
		if v.Kind == yaml.MappingNode {
			if len(path) == 0 && name == "keys" {
				// The key bindings, in the keys file's format, read by
				// its parser: its errors name the line, parseConfig the
				// file. (keys: with a value is tui's --keys, the file.)
				keys, err := keymap.ParseNode("config file "+cfg.path, v)
				if err != nil {
					return err
				}
				cfg.keys = keys
				continue
			}
			sub := subcommand(cmd, name)
			if sub == nil {
				if name == "keys" {
					return fmt.Errorf("line %d: %s: key bindings go in the keys section at the top level", v.Line, key)
				}
				if flags[name] {
					return fmt.Errorf("line %d: %s: want a value, not a mapping", v.Line, key)
				}
				return unknownKey(k.Line, key, name, cmd, flags)
			}
			if sec.sections == nil {
				sec.sections = map[string]*configSection{}
			}
			child := sec.sections[sub.Name()]
			if child == nil {
				child = &configSection{}
				sec.sections[sub.Name()] = child
			}
			if err := cfg.parseSection(sub, child, v, append(path, name)); err != nil {
				return err
			}
			continue
		}
		if !flags[name] {
			return unknownKey(k.Line, key, name, cmd, flags)
		}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				continue // "store:" with nothing after it sets nothing
			}
		case yaml.SequenceNode:
			for _, item := range v.Content {
				if item.Kind != yaml.ScalarNode {
					return fmt.Errorf("line %d: %s: want a list of plain values", item.Line, key)
				}
			}
		default:
			return fmt.Errorf("line %d: %s: want a value", v.Line, key)
		}
		if sec.values == nil {
			sec.values = map[string]*yaml.Node{}
		}
		sec.values[name] = v
	}
	return nil
}

// unknownKey says a key is not known, and why when it is a flag that
// cannot be set from a file.
func unknownKey(line int, key, name string, cmd *cobra.Command, flags map[string]bool) error {
	if commandLineOnly[name] || selectorFlags[name] {
		return fmt.Errorf("line %d: %s: --%s is given on the command line only: it says what one command acts on", line, key, name)
	}
	known := make([]string, 0, len(flags))
	for f := range flags {
		known = append(known, f)
	}
	for _, c := range cmd.Commands() {
		if !unconfigured[c.Name()] {
			known = append(known, c.Name())
		}
	}
	if !cmd.HasParent() {
		known = append(known, "keys")
	}
	if s := suggest.Closest(name, known); s != "" {
		return fmt.Errorf("line %d: unknown key %q (did you mean %q?)", line, key, s)
	}
	sort.Strings(known)
	return fmt.Errorf("line %d: unknown key %q; known here: %s", line, key, strings.Join(known, ", "))
}

// subcommand finds a child of cmd that takes settings, by name or alias.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if !unconfigured[c.Name()] && (c.Name() == name || c.HasAlias(name)) {
			return c
		}
	}
	return nil
}

// subtreeFlags is the names of the settings of cmd and every command
// under it.
func subtreeFlags(cmd *cobra.Command) map[string]bool {
	out := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if isUnconfigured(c) {
			return
		}
		allFlags(c, func(f *pflag.Flag) {
			if configurable(c, f) {
				out[f.Name] = true
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
	return out
}

// source ranks where a setting came from: higher wins.
type source int

const (
	fromDefault source = iota
	fromFile           // + the section's depth: a command's section beats the top level
	fromEnv     source = 100
	fromFlag    source = 200
)

// setting is one flag's resolved value.
type setting struct {
	flag  *pflag.Flag
	rank  source
	where string     // "--store", "SLUICE_STORE", "config.yaml line 3 (jobs.store)"
	env   string     // the flag's variable, or ""
	value string     // from the environment, or a file scalar
	list  *yaml.Node // a file sequence
}

// apply sets the flag from the environment or the file; flags and
// defaults are already in place.
func (v setting) apply() error {
	if v.rank == fromDefault || v.rank == fromFlag {
		return nil
	}
	var err error
	if v.list != nil {
		items := make([]string, len(v.list.Content))
		for i, n := range v.list.Content {
			items[i] = n.Value
		}
		if sv, ok := v.flag.Value.(pflag.SliceValue); ok {
			err = sv.Replace(items)
		} else {
			err = v.flag.Value.Set(strings.Join(items, ","))
		}
	} else {
		err = v.flag.Value.Set(v.value)
	}
	if err != nil {
		shown := v.value
		if v.flag.Name == "token" {
			shown = "…"
		}
		return fmt.Errorf("%s: --%s %q: %w", v.where, v.flag.Name, shown, err)
	}
	return nil
}

// display is the value a setting gives its flag, for config show.
func (v setting) display() string {
	switch {
	case v.rank == fromDefault || v.rank == fromFlag:
		return v.flag.Value.String()
	case v.list != nil:
		items := make([]string, len(v.list.Content))
		for i, n := range v.list.Content {
			items[i] = n.Value
		}
		return strings.Join(items, ",")
	}
	return v.value
}

// resolve finds where each of cmd's settings comes from: the command line,
// the environment, the most specific section of the file, or the default.
func (s *settings) resolve(cmd *cobra.Command, cfg *configFile) ([]setting, error) {
	// The file's sections that apply, top level first.
	secs := []*configSection{cfg.root}
	for _, name := range commandPath(cmd) {
		next := secs[len(secs)-1].sections[name]
		if next == nil {
			break
		}
		secs = append(secs, next)
	}
	path := commandPath(cmd)
	var out []setting
	allFlags(cmd, func(f *pflag.Flag) {
		if !configurable(cmd, f) {
			return
		}
		v := setting{flag: f, env: envName(f.Name), where: "default"}
		switch {
		case f.Changed:
			v.rank, v.where = fromFlag, "--"+f.Name
		default:
			if val, ok := s.env(v.env); ok {
				v.rank, v.where, v.value = fromEnv, v.env, val
				break
			}
			for d := len(secs) - 1; d >= 0; d-- {
				n := secs[d].values[f.Name]
				if n == nil {
					continue
				}
				key := strings.Join(append(append([]string(nil), path[:d]...), f.Name), ".")
				v.rank = fromFile + source(d)
				v.where = fmt.Sprintf("%s line %d (%s)", cfg.path, n.Line, key)
				if n.Kind == yaml.SequenceNode {
					v.list = n
				} else {
					v.value = n.Value
				}
				break
			}
		}
		out = append(out, v)
	})
	// Of exclusive flags, the strongest source decides.
	for _, group := range exclusiveFlags {
		var best *setting
		for i := range out {
			if inGroup(group, out[i].flag.Name) && (best == nil || out[i].rank > best.rank) {
				best = &out[i]
			}
		}
		if best == nil {
			continue
		}
		for i, v := range out {
			if inGroup(group, v.flag.Name) && v.rank < best.rank && v.rank != fromDefault {
				out[i].rank, out[i].list = fromDefault, nil
				out[i].where = fmt.Sprintf("default (%s gives way to --%s from %s)", v.where, best.flag.Name, best.where)
			}
		}
	}
	return out, nil
}

func inGroup(group []string, name string) bool {
	for _, g := range group {
		if g == name {
			return true
		}
	}
	return false
}

// loadKeyMap builds the console's key bindings: the defaults, then the
// config file's keys section, then the keys file (missing is fine), the
// later winning for each action it names. Both are in the one format
// keymap.Parse reads.
func loadKeyMap(ctx context.Context, keysPath string) (*keymap.KeyMap, error) {
	var layers []keymap.Overrides
	if cfg := configFrom(ctx); cfg != nil {
		layers = append(layers, cfg.keys)
	}
	if keysPath != "" {
		file, err := keymap.ReadFile(keysPath)
		if err != nil {
			return nil, err
		}
		layers = append(layers, file)
	}
	return keymap.Build(layers...)
}
