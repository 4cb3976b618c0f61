package cli

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
	"github.com/sluicehq/sluice/internal/termtext"
)

// The cold archive: --archive-queues opts queues in (serve, worker, demo
// and tui --worker; a setting, so SLUICE_ARCHIVE_QUEUES and
// archive-queues: [billing] in the config file give it too), and `sluice
// archive list|show` reads what the retention sweep archived. The archive
// is for audit, not redrive; it is read on the store itself (--store), as
// the control API serves no archive.

// archiveQueuesFlag is --archive-queues.
type archiveQueuesFlag struct{ queues []string }

func (a *archiveQueuesFlag) add(f *pflag.FlagSet) {
	f.StringSliceVar(&a.queues, "archive-queues", nil,
		"queues whose terminal jobs the retention sweep copies into the cold archive before deleting them, comma-separated "+
			"(PostgreSQL; read with sluice archive list)")
}

// storeURL is raw with the flag's queues added to the store's
// archive_queues parameter. A store without a cold archive refuses the
// flag rather than ignore it.
func (a *archiveQueuesFlag) storeURL(raw string) (string, error) {
	var qs []string
	for _, q := range a.queues {
		if q = strings.TrimSpace(q); q != "" {
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		return raw, nil
	}
	t, err := storeurl.Parse(raw)
	if err != nil {
		return "", err
	}
	if t.Backend != "postgres" {
		return "", fmt.Errorf("--archive-queues: %w: this store (%s) has no cold archive", engine.ErrUnsupported, t.Backend)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("--archive-queues: %w: store url: %s", engine.ErrInvalid, redact.ParseError(err))
	}
	q := u.Query()
	if have := q.Get("archive_queues"); have != "" {
		qs = append(strings.Split(have, ","), qs...)
	}
	q.Set("archive_queues", strings.Join(qs, ","))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// archiveOptions are the flags of sluice archive.
type archiveOptions struct {
	store  string
	output string
}

func newArchiveCmd() *cobra.Command {
	o := &archiveOptions{}
	cmd := &cobra.Command{
		Use:   "archive",
		Short: "Read the cold archive of evicted jobs (PostgreSQL)",
		Long: `Read the cold archive: the terminal jobs the retention sweep evicted from
queues that opted in (--archive-queues on serve, worker, demo), kept by month
of eviction. For audit; nothing redrives from it. Read on the store itself
(--store); a store without a cold archive says so.`,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.store, "store", "", "the store, as postgres://host/db?schema=sluice (env SLUICE_STORE)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")

	var queue, kind, cursor string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List archived jobs, newest eviction first",
		Example: `  sluice archive list --store postgres://127.0.0.1/sluice --queue billing --limit 20
  sluice archive list --store postgres://127.0.0.1/sluice --kind invoice.generate -o json`,
		Args: cobra.NoArgs,
		RunE: o.with(func(cmd *cobra.Command, a backend.ArchiveStore, _ []string) error {
			if limit < 1 || limit > engine.MaxListLimit {
				return fmt.Errorf("--limit %d: %w: want 1–%d", limit, engine.ErrInvalid, engine.MaxListLimit)
			}
			p := &backend.ArchiveListParams{Queue: queue, Kind: kind, Limit: limit}
			if cursor != "" {
				c, err := engine.DecodeCursor(cursor)
				if err != nil {
					return fmt.Errorf("--cursor: %w", err)
				}
				p.After = &c
			}
			js, err := a.ArchiveList(cmd.Context(), p)
			if err != nil {
				return err
			}
			next := ""
			if len(js) == limit {
				last := js[len(js)-1]
				next = engine.Cursor{At: last.EvictedAt, ID: last.ID, Dir: engine.CursorNext}.Encode()
			}
			if o.output == "json" {
				if js == nil {
					js = []engine.ArchivedJob{}
				}
				return printJSON(cmd.OutOrStdout(), map[string]any{"jobs": js, "next_cursor": next})
			}
			rows := make([][]string, len(js))
			for i, j := range js {
				rows[i] = []string{cliText(j.ID), string(j.State), cliText(j.Queue), cliText(j.Kind),
					fmt.Sprintf("%d/%d", j.AttemptShown(), j.MaxAttempts), j.EvictedAt.UTC().Format(time.RFC3339), short(cliText(lastError(j.Job)), 60)}
			}
			if err := table(cmd.OutOrStdout(), "ID\tSTATE\tQUEUE\tKIND\tATTEMPT\tEVICTED\tLAST ERROR", rows); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s\n", next)
			}
			return nil
		}),
	}
	lf := list.Flags()
	lf.StringVar(&queue, "queue", "", "only this queue")
	lf.StringVar(&kind, "kind", "", "only this kind")
	lf.IntVar(&limit, "limit", 50, fmt.Sprintf("rows per page (1–%d)", engine.MaxListLimit))
	lf.StringVar(&cursor, "cursor", "", "continue from a previous page")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show the archived copies of one job, newest eviction first",
		Args:  cobra.ExactArgs(1),
		RunE: o.with(func(cmd *cobra.Command, a backend.ArchiveStore, args []string) error {
			js, err := a.ArchiveGet(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), js)
			}
			for i, j := range js {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if err := printArchived(cmd.OutOrStdout(), j); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	cmd.AddCommand(list, show)
	return cmd
}

// with opens the store --store names (never creating or migrating it),
// takes its cold archive, runs fn and closes the store.
func (o *archiveOptions) with(fn func(cmd *cobra.Command, a backend.ArchiveStore, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if o.output != "table" && o.output != "json" {
			return fmt.Errorf("-o %q: want table or json", o.output)
		}
		if o.store == "" {
			return fmt.Errorf("name the store with --store URL (or SLUICE_STORE, or store: in the config file)")
		}
		s, err := storeurl.OpenExisting(cmd.Context(), o.store, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		defer s.Close()
		a, err := backend.ArchiveOf(s)
		if err != nil {
			return err
		}
		return fn(cmd, a, args)
	}
}

func printArchived(w io.Writer, j engine.ArchivedJob) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	field := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	field("id", cliText(j.ID))
	field("queue", cliText(j.Queue))
	field("kind", cliText(j.Kind))
	field("state", string(j.State))
	field("reason", string(j.TerminalReason))
	field("attempt", fmt.Sprintf("%d of %d (crashes %d)", j.AttemptShown(), j.MaxAttempts, j.CrashAttempt))
	field("created", j.CreatedAt.UTC().Format(time.RFC3339))
	if j.FinalizedAt != nil {
		field("finalized", j.FinalizedAt.UTC().Format(time.RFC3339))
	}
	field("evicted", j.EvictedAt.UTC().Format(time.RFC3339))
	field("fingerprint", j.Fingerprint)
	if len(j.Payload) > 0 {
		field("payload", cliText(string(j.Payload)))
	}
	for _, e := range j.Errors {
		field(fmt.Sprintf("error %d", e.Attempt), cliText(e.Message))
	}
	return tw.Flush()
}

// cliText is termtext.Text on one line: a cell of a table or a field
// of a sheet, so tabs and line breaks become spaces.
func cliText(s string) string {
	return termtext.Text(strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s))
}
