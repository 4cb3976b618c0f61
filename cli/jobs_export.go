package cli

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
)

// sluice jobs export: every job a filter matches, as JSON lines or CSV.

// exportFormats are the formats jobs export writes.
var exportFormats = []string{"jsonl", "csv"}

// exporter is a Control that streams an export itself (api.Client over
// GET /jobs/export); any other is paged through engine.ExportJobs.
type exporter interface {
	ExportJobs(ctx context.Context, p engine.ExportJobsParams, emit func(*engine.Job) error) error
}

func (o *ctlOptions) exportCmd() *cobra.Command {
	var (
		ff          filterFlags
		format      string
		withPayload bool
		outFile     string
	)
	cmd := &cobra.Command{
		Use:   "export [-q QUERY] [--format jsonl|csv] [--include-payload] [-o FILE]",
		Short: "Write every job a query matches, as JSON lines or CSV",
		Long: `Write every job a query matches, newest first by the time each entered its
state: one JSON object a line (jsonl, as the API writes a job) or CSV with a
header row. It reads the store a page at a time and writes as it goes, so a
million jobs take the memory of one page. Over --api it reads the server's
GET /api/v1/jobs/export stream.

Payloads are left out unless --include-payload (which needs the inspector
role over --api). Job text is written as on the terminal: control
characters and escape sequences are shown as \uXXXX, never sent. A CSV cell
that a spreadsheet would run as a formula (starting with =, +, -, @, a tab
or a carriage return) starts with a single quote.`,
		Example: `  sluice jobs export --store sqlite://sluice.db -q 'state:archived queue:billing' -o dead.jsonl
  sluice jobs export --api http://127.0.0.1:8080 -q 'state:archived' --format csv --include-payload -o dead.csv`,
		Args: cobra.NoArgs,
	}
	ff.add(cmd)
	cmd.Flags().StringVar(&format, "format", "jsonl", "jsonl or csv")
	cmd.Flags().BoolVar(&withPayload, "include-payload", false, "include each job's payload (inspector and up)")
	// -o names the file here, as it does for an export elsewhere; the
	// jobs tree's -o (table or json) says nothing of an export.
	cmd.Flags().StringVarP(&outFile, "output", "o", "", "write to FILE (mode 0600) instead of standard output")
	_ = cmd.Flags().SetAnnotation("output", commandLineOnlyAnnotation, []string{"true"})
	run := o.withSession(func(cmd *cobra.Command, s *session, _ []string) error {
		f, err := ff.filter()
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout() // termtext.Writer (withSession)
		var file *os.File
		if outFile != "" && outFile != "-" {
			if file, err = os.OpenFile(outFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			defer file.Close()
			out = termtext.Writer(file)
		}
		bw := bufio.NewWriterSize(out, 64<<10)
		w, err := newExportWriter(format, bw, withPayload)
		if err != nil {
			return err
		}
		n := 0
		emit := func(j *engine.Job) error {
			n++
			return w.write(j)
		}
		p := engine.ExportJobsParams{Filter: f, WithPayload: withPayload}
		if ex, ok := s.ctl.(exporter); ok {
			err = ex.ExportJobs(s.ctx, p, emit)
		} else {
			err = engine.ExportJobs(s.ctx, s.ctl, p, emit)
		}
		if err == nil {
			err = w.close()
		}
		if err == nil {
			err = bw.Flush()
		}
		if err == nil && file != nil {
			err = file.Close()
		}
		if err != nil {
			return fmt.Errorf("export after %d job(s): %w", n, err)
		}
		what := fmt.Sprintf("exported %d job(s)", n)
		if n == 0 && !f.IsEmpty() {
			what = "no job matches " + f.String()
		}
		if file != nil {
			what += " to " + outFile
		}
		fmt.Fprintln(cmd.ErrOrStderr(), what)
		return nil
	})
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		// A bad format is refused before the store is opened.
		if _, err := newExportWriter(format, io.Discard, false); err != nil {
			return err
		}
		return run(cmd, args)
	}
	return cmd
}

// exportWriter writes jobs in one format.
type exportWriter interface {
	write(j *engine.Job) error
	close() error
}

func newExportWriter(format string, w io.Writer, withPayload bool) (exportWriter, error) {
	switch format {
	case "jsonl":
		return &jsonlWriter{w: w}, nil
	case "csv":
		return newCSVWriter(w, withPayload), nil
	}
	return nil, fmt.Errorf("--format %q: want %s", format, strings.Join(exportFormats, " or "))
}

// jsonlWriter writes a job a line, as the API writes a job.
type jsonlWriter struct {
	w   io.Writer
	buf []byte
}

func (w *jsonlWriter) write(j *engine.Job) error {
	w.buf = api.AppendJobLine(w.buf[:0], j)
	_, err := w.w.Write(w.buf)
	return err
}

func (w *jsonlWriter) close() error { return nil }

// csvColumns are the CSV export's columns; payload is added last when
// asked for.
var csvColumns = []string{"id", "queue", "kind", "state", "attempt", "max_attempts", "crash_attempt", "priority",
	"tags", "fingerprint", "terminal_reason", "created_at", "scheduled_at", "state_changed_at", "finalized_at",
	"superseded_by", "retry_of", "last_error"}

type csvWriter struct {
	w           *csv.Writer
	withPayload bool
	row         []string
	header      bool
}

func newCSVWriter(w io.Writer, withPayload bool) *csvWriter {
	return &csvWriter{w: csv.NewWriter(w), withPayload: withPayload}
}

func (c *csvWriter) write(j *engine.Job) error {
	if !c.header {
		if err := c.writeHeader(); err != nil {
			return err
		}
	}
	tm := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	fin := ""
	if j.FinalizedAt != nil {
		fin = tm(*j.FinalizedAt)
	}
	c.row = append(c.row[:0], j.ID, j.Queue, j.Kind, string(j.State), strconv.Itoa(j.Attempt), strconv.Itoa(j.MaxAttempts),
		strconv.Itoa(j.CrashAttempt), strconv.Itoa(j.Priority), strings.Join(j.Tags, " "), j.Fingerprint,
		string(j.TerminalReason), tm(j.CreatedAt), tm(j.ScheduledAt), tm(j.StateChangedAt), fin,
		j.SupersededBy, j.RetryOf, lastError(j))
	if c.withPayload {
		c.row = append(c.row, string(j.Payload))
	}
	for i, v := range c.row {
		c.row[i] = spreadsheetCell(v)
	}
	return c.w.Write(c.row)
}

func (c *csvWriter) writeHeader() error {
	c.header = true
	h := csvColumns
	if c.withPayload {
		h = append(h[:len(h):len(h)], "payload")
	}
	return c.w.Write(h)
}

// close writes the header of an export with no job, so that a file of
// none still says what it would hold, and flushes.
func (c *csvWriter) close() error {
	if !c.header {
		if err := c.writeHeader(); err != nil {
			return err
		}
	}
	c.w.Flush()
	return c.w.Error()
}

// spreadsheetCell keeps a spreadsheet from running a cell as a formula
// (CSV injection): a cell starting with =, +, - or @, or with a tab or a
// carriage return (which some spreadsheets strip before they look), gets
// a leading single quote, which spreadsheets show as text and do not
// display. Job data is the operator's users' data: an error text or a
// payload field may be written by anyone.
func spreadsheetCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}
