package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/redact"
)

func newConfigCmd(s *settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Where settings come from: environment, config file, flags",
		Long: `Every flag that is a setting can come from three places; the first that
gives it wins:

  1. the command line:  --store sqlite://jobs.db
  2. the environment:   SLUICE_STORE=sqlite://jobs.db (SLUICE_ and the flag
                        name in upper case, dashes as underscores:
                        --log-level is SLUICE_LOG_LEVEL)
  3. the config file:   store: sqlite://jobs.db

Flags that say what one command acts on or confirm it (--state, --queue,
--kind, -q of the operator commands, --yes, --force, --dry-run, --payload,
--limit, --cursor, ...) come from the command line only. The server's
SLUICE_TOKENS holds the tokens themselves; the config file may name a
tokens file instead (tokens: /etc/sluice/tokens).

The config file is $XDG_CONFIG_HOME/sluice/config.yaml (~/.config/sluice/
config.yaml when XDG_CONFIG_HOME is unset), or the file --config or
SLUICE_CONFIG names. It is YAML: settings at the top level apply to every
command that has that flag; a section named after a command applies to
it and the commands under it, and wins over the top level; keys rebinds
the console's keys (action: key or [keys]; [] unbinds; quote the keys
YAML reads as its own, as "?" and ":"), in the format of the keys file
(keys.yaml, see sluice tui --help), whose bindings win. An unknown key,
action or key name is an error that names it and its line. Keep the
file private if it holds a token.

  # ~/.config/sluice/config.yaml
  store: sqlite:///var/lib/sluice/jobs.db
  log-level: warn
  output: table
  retention: [archived=30d, billing/completed=1h]   # serve, worker, demo, tui
  audit-retention: 180d   # the audit trail's own (90d unless given)
  archive-queues: [billing]   # cold-archive what retention evicts (PostgreSQL)
  serve:
    listen: 127.0.0.1:9090
    tokens: /etc/sluice/tokens
  worker:
    queues: [billing, email]
    concurrency: 20
  jobs:
    api: http://127.0.0.1:9090      # jobs commands talk to the server
  keys:
    retry: R
    down: [j, down, ctrl+n]

--api and --store name one target: the stronger source that sets either
decides, so the jobs section's api wins over the top level's store for
the jobs commands, and SLUICE_API beats store: in the file.`,
	}
	path := &cobra.Command{
		Use:   "path",
		Short: "Print the config file in use, and whether it exists",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := s.load(cmd.Root())
			if err != nil {
				return err
			}
			switch {
			case cfg.path == "":
				fmt.Fprintln(cmd.OutOrStdout(), "no config file: neither XDG_CONFIG_HOME nor HOME is set")
			case cfg.exists:
				fmt.Fprintln(cmd.OutOrStdout(), cfg.path)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%s (does not exist)\n", cfg.path)
			}
			return nil
		},
	}
	show := &cobra.Command{
		Use:   "show COMMAND...",
		Short: "Show each setting of a command: its value and where it comes from",
		Example: `  sluice config show jobs list
  SLUICE_API=http://127.0.0.1:8080 sluice config show tui`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || len(rest) > 0 || !target.HasParent() {
				return fmt.Errorf("config show: %q names no command", strings.Join(args, " "))
			}
			if isUnconfigured(target) {
				return fmt.Errorf("config show: %s takes no settings", target.CommandPath())
			}
			cfg, err := s.load(cmd.Root())
			if err != nil {
				return err
			}
			vals, err := s.resolve(target, cfg)
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(vals))
			for _, v := range vals {
				env := v.env
				if env == "" {
					env = "-"
				}
				// Every value passes through redact.URL: a store or API URL
				// may carry a password, in its user or in its query.
				value := redact.URL(v.display())
				if v.flag.Name == "token" && value != "" {
					value = "(set)"
				}
				if value == "" {
					value = `""`
				}
				rows = append(rows, []string{"--" + v.flag.Name, env, value, v.where})
			}
			return table(cmd.OutOrStdout(), "FLAG\tENV\tVALUE\tFROM", rows)
		},
	}
	cmd.AddCommand(path, show)
	return cmd
}
