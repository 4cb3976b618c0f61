package cmdline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/termtext"
)

// ExitError ends a command with a status and nothing more printed: the
// command has said what went wrong already.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// UnknownCommandError is a word typed where a command group wanted one of
// its commands (`sluice jobs shw`): cobra would print the group's help and
// exit 0, so a typo in a script would pass for success.
type UnknownCommandError struct {
	Name        string   // what was typed
	Group       string   // the group's command path, "sluice jobs"
	Suggestions []string // commands of the group it is close to
}

func (e *UnknownCommandError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown command %q for %q", e.Name, e.Group)
	if len(e.Suggestions) > 0 {
		b.WriteString("\n\nDid you mean this?\n")
		for _, s := range e.Suggestions {
			fmt.Fprintf(&b, "\t%s\n", s)
		}
	}
	fmt.Fprintf(&b, "\nRun '%s --help' for its commands.", e.Group)
	return b.String()
}

// RefuseUnknownCommands makes every command group under root (a command
// with commands of its own and nothing to run) refuse a word it does not
// know with an UnknownCommandError, and show its help when given none.
func RefuseUnknownCommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		RefuseUnknownCommands(c)
		if !c.HasSubCommands() || c.Runnable() {
			continue
		}
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // cobra's own default for the root
			}
			return &UnknownCommandError{Name: args[0], Group: cmd.CommandPath(), Suggestions: cmd.SuggestionsFor(args[0])}
		}
	}
}

// Run executes root with args and returns the exit status: 0, an
// ExitError's code, or 1 after writing "name: error" to stderr.
func Run(ctx context.Context, root *cobra.Command, name string, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		var ex ExitError
		if errors.As(err, &ex) {
			return ex.Code
		}
		var unknown *UnknownCommandError
		if _, _, ferr := root.Find(args); ferr != nil || errors.As(err, &unknown) {
			// An unknown command, with its "Did you mean this?" lines:
			// the name typed is quoted, so holds no line break; the
			// lines are kept, each made safe.
			fmt.Fprintf(stderr, "%s: %s\n", name, strings.Join(termtext.Lines(strings.TrimRight(err.Error(), "\n")), "\n"))
			return 1
		}
		fmt.Fprintf(stderr, "%s: %s\n", name, termtext.Line(err.Error()))
		return 1
	}
	return 0
}
