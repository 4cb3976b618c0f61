package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/engine"
)

// Shell completion: cobra's completion command (sluice completion bash|
// zsh|fish|powershell) writes the script; the script asks the binary
// (sluice __complete ...) for candidates, which come from the command tree
// and from the value lists below.

// flagValues completes flags whose values are a short fixed list, by flag
// name, on every command that has them.
var flagValues = map[string]func() []string{
	"state":     stateValues,
	"output":    fixed("table\tan aligned table", "json\tindented JSON"),
	"theme":     fixed("dark", "light", "high-contrast", "mono"),
	"log-level": fixed("debug", "info", "warn", "error"),
}

// argDescriptions describe the fixed arguments (ValidArgs) of commands,
// by command path, for the shells that show descriptions.
var argDescriptions = map[string]map[string]string{
	"sluice bulk": {
		"retry":   "redrive dead jobs (archived, cancelled, undecodable → available)",
		"cancel":  "cancel jobs that have not finished",
		"delete":  "delete jobs that are not running",
		"release": "return quarantined jobs to available",
	},
}

func stateValues() []string {
	out := make([]string, 0, len(engine.AllStates))
	for _, s := range engine.AllStates {
		out = append(out, string(s))
	}
	return out
}

func fixed(vs ...string) func() []string { return func() []string { return vs } }

// registerCompletions adds the value completions to every command under
// root and turns cobra's completion command on.
func registerCompletions(root *cobra.Command) {
	root.CompletionOptions.DisableDefaultCmd = false
	done := map[*pflag.Flag]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		// Flags are registered on the command that defines them.
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			values, ok := flagValues[f.Name]
			if !ok || done[f] {
				return
			}
			done[f] = true
			_ = c.RegisterFlagCompletionFunc(f.Name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return values(), cobra.ShellCompDirectiveNoFileComp
			})
		})
		// A tab separates a value from its description; cobra's argument
		// checks read only the value.
		for i, v := range c.ValidArgs {
			if d, ok := argDescriptions[c.CommandPath()][v]; ok {
				c.ValidArgs[i] = v + "\t" + d
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
