package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/engine"
)

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			code, out, stderr := runCLI(t, "", "completion", shell)
			if code != 0 || len(out) < 500 || !strings.Contains(out, "sluice") || !strings.Contains(out, "__complete") {
				t.Fatalf("completion %s: exit %d, %d bytes: %s", shell, code, len(out), stderr)
			}
		})
	}
}

// complete asks for candidates as the shell scripts do and returns them
// (without descriptions) and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	code, out, stderr := runCLI(t, "", append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d %s", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var got []string
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		got = append(got, v)
	}
	return got, lines[len(lines)-1]
}

func TestDynamicCompletion(t *testing.T) {
	t.Parallel()
	var states []string
	for _, s := range engine.AllStates {
		states = append(states, string(s))
	}
	noFiles := ":4" // ShellCompDirectiveNoFileComp
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"jobs list --state", []string{"jobs", "list", "--state", ""}, states},
		{"bulk --state", []string{"bulk", "retry", "--state", ""}, states},
		{"tui --state", []string{"tui", "--state", ""}, states},
		{"jobs list -o", []string{"jobs", "list", "-o", ""}, []string{"table", "json"}},
		{"queues list --output", []string{"queues", "list", "--output", ""}, []string{"table", "json"}},
		{"bulk actions", []string{"bulk", ""}, []string{"retry", "cancel", "delete", "release"}},
		{"bulk actions by prefix", []string{"bulk", "re"}, []string{"retry", "release"}},
		{"tui --theme", []string{"tui", "--theme", ""}, []string{"dark", "light", "high-contrast", "mono"}},
		{"--log-level", []string{"worker", "--log-level", ""}, []string{"debug", "info", "warn", "error"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, directive := complete(t, tc.args...)
			if !slices.Equal(got, tc.want) || directive != noFiles {
				t.Fatalf("got %q %s, want %q %s", got, directive, tc.want, noFiles)
			}
		})
	}
	got, _ := complete(t, "")
	for _, c := range []string{"migrate", "completion", "config", "jobs", "serve"} {
		if !slices.Contains(got, c) {
			t.Errorf("commands %q lack %s", got, c)
		}
	}
}

// TestHelpText: every command says what it does and every flag what it
// is for, and --help works on each.
func TestHelpText(t *testing.T) {
	t.Parallel()
	root := newRoot()
	root.InitDefaultCompletionCmd("completion")
	var walk func(c *cobra.Command)
	var paths [][]string
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		if strings.TrimSpace(c.Short) == "" {
			t.Errorf("%s has no short help", c.CommandPath())
		}
		if c.HasSubCommands() && c.HasParent() && strings.TrimSpace(c.Long) == "" {
			t.Errorf("%s has subcommands and no long help", c.CommandPath())
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.TrimSpace(f.Usage) == "" {
				t.Errorf("%s --%s has no usage", c.CommandPath(), f.Name)
			}
		})
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, p := range paths {
		code, out, stderr := runCLI(t, "", append(slices.Clone(p), "--help")...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v --help: exit %d %s", p, code, stderr)
		}
	}
}
