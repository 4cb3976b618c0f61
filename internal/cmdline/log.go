// Package cmdline holds what the command lines of sluice and of the
// benchmark binary (internal/bench) share: the log flags and running a
// cobra root to an exit status.
package cmdline

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
)

// LogOptions are the --log-file and --log-level flags every command of
// sluice and of the benchmark binary shares.
type LogOptions struct {
	File  string
	Level string
}

// AddFlags registers --log-file and --log-level on fs; fileHelp says
// where logs go without --log-file.
func (lo *LogOptions) AddFlags(fs *pflag.FlagSet, fileHelp string) {
	fs.StringVar(&lo.File, "log-file", "", fileHelp)
	fs.StringVar(&lo.Level, "log-level", "info", "log level: debug, info, warn, error")
}

// Logger opens the log destination: the --log-file when given, else
// fallback (nil means discard). The returned close flushes and closes the
// file.
func (lo *LogOptions) Logger(fallback io.Writer) (*slog.Logger, func(), error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(lo.Level)); err != nil {
		return nil, nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", lo.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	if lo.File != "" {
		// Private: a log names job ids, queues and errors, which the
		// API shows by role, not to every local user.
		f, err := os.OpenFile(lo.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("open log file: %w", err)
		}
		return slog.New(slog.NewTextHandler(f, opts)), func() { _ = f.Close() }, nil
	}
	if fallback == nil {
		return slog.New(slog.DiscardHandler), func() {}, nil
	}
	return slog.New(slog.NewTextHandler(fallback, opts)), func() {}, nil
}
