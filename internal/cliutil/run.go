package cliutil

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
		if _, _, ferr := root.Find(args); ferr != nil {
			// cobra's unknown command, with its "Did you mean this?"
			// lines: they are its own (the name typed is quoted, so
			// holds no line break), kept as lines, each made safe.
			fmt.Fprintf(stderr, "%s: %s\n", name, strings.Join(termtext.Lines(strings.TrimRight(err.Error(), "\n")), "\n"))
			return 1
		}
		fmt.Fprintf(stderr, "%s: %s\n", name, termtext.Line(err.Error()))
		return 1
	}
	return 0
}
