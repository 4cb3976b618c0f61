package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// ExportContentType is the type of GET /jobs/export's answer: one job a
// line, as GET /jobs writes each job.
const ExportContentType = "application/x-ndjson"

// exportFlushBytes is how much of the export is held before it is sent:
// large enough that a write is not a syscall per job, small enough that a
// client sees the stream move and the server holds a few pages at most.
const exportFlushBytes = 64 << 10

// exportQueryParams are the parameters GET /jobs/export knows: the job
// list's filter, and include_payload as GET /jobs/{id} has it. Paging
// is the server's own (the cursor and limit of GET /jobs are not taken).
var exportQueryParams = []string{"state", "queue", "kind", "q", "include_payload"}

// exportJobs answers GET /jobs/export: every job the filter matches, one
// JSON object a line, newest first. It is written page by page as the
// store is read (engine.ExportJobs), so a million jobs cost the server
// the memory of one page. A failure before the first byte is an ordinary
// error answer; one after it (the status already sent) ends the stream
// with a last line holding the error body, which no job line resembles
// (a job always has an id, an error body never).
func (s *Server) exportJobs(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	if err := knownParams(v, exportQueryParams...); err != nil {
		return err
	}
	withPayload, err := boolParam(v, "include_payload")
	if err != nil {
		return err
	}
	v.Del("include_payload")
	f, err := parseFilterQuery(v)
	if err != nil {
		return err
	}
	if withPayload {
		// As GET /jobs/{id}: a viewer asking for payloads is refused, not
		// answered without them, so an export never silently lacks them.
		if err := c.need(engine.RoleInspector, "read payloads"); err != nil {
			return err
		}
	}
	if err := checkFilter(c, &f); err != nil {
		return err
	}
	bp := jobPageBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 {
			jobPageBufs.Put(bp)
		}
	}()
	b := (*bp)[:0]
	started := false
	send := func() error {
		if !started {
			started = true
			w.Header().Set("Content-Type", ExportContentType)
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		return nil
	}
	err = engine.ExportJobs(r.Context(), s.ctl, engine.ExportJobsParams{Filter: f, WithPayload: withPayload}, func(j *engine.Job) error {
		b = AppendJobLine(b, redactJob(c, j))
		if len(b) >= exportFlushBytes {
			return send()
		}
		return nil
	})
	*bp = b
	if err != nil {
		if !started {
			return err
		}
		_, body := errorResponse(err)
		b = append(b, marshalBody(body)...)
		*bp = b
		_ = send()
		return err
	}
	err = send()
	*bp = b
	return err
}

// AppendJobLine appends j and a newline as the API writes a job: the
// bytes encoding/json writes for it (HTML escaping off), by the job
// list's fast path when it can (listjson.go), which costs a tenth as
// much. `sluice jobs export` writes its JSON lines with it, so a file
// exported through a store and one through the API are alike.
func AppendJobLine(b []byte, j *engine.Job) []byte {
	if jobPageShapeOK {
		if out, ok := appendJob(b, j); ok {
			return append(out, '\n')
		}
	}
	return append(b, marshalBody(j)...)
}

// exportMaxLine bounds one line of an export as the client reads it: a
// job with the largest payload a server takes, escaped, fits well within.
const exportMaxLine = 64 << 20

// ExportJobs streams GET /jobs/export: it hands emit each job as its line
// arrives, so the client holds one job at a time however many the export
// has. The answer's headers must come within the client's Timeout, and
// each read after within it too (the server sends as it reads the store,
// so a silent stream is a stuck one); the whole export has no bound. An
// error line the server ends a failing stream with comes back as the
// error it carries; a stream cut short is ErrUnavailable. The request is
// not retried: emit has seen what came before.
func (c *Client) ExportJobs(ctx context.Context, p engine.ExportJobsParams, emit func(*engine.Job) error) error {
	if c.baseErr != nil {
		return c.baseErr
	}
	v := filterQuery(p.Filter)
	if p.WithPayload {
		v.Set("include_payload", "true")
	}
	target := c.base.Scheme + "://" + c.base.Host + c.base.EscapedPath() + Prefix + "/jobs/export"
	if len(v) > 0 {
		target += "?" + v.Encode()
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(sctx, "GET", target, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", engine.ErrInvalid, err)
	}
	c.decorate(ctx, req)
	req.Header.Set("Accept", ExportContentType)
	idle := time.AfterFunc(c.opts.Timeout, func() { cancel(errStreamIdle) })
	defer idle.Stop()
	resp, err := c.stream.Do(req)
	if err != nil {
		if isCanceled(ctx, err) {
			return ctx.Err()
		}
		return fmt.Errorf("GET /jobs/export: %w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return decodeError(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), exportMaxLine)
	for sc.Scan() {
		idle.Reset(c.opts.Timeout)
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte(`{"error":`)) {
			return decodeError(http.StatusInternalServerError, line)
		}
		j := new(engine.Job)
		if err := json.Unmarshal(line, j); err != nil {
			return fmt.Errorf("GET /jobs/export: undecodable line: %w", err)
		}
		if err := emit(j); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if isCanceled(ctx, err) {
			return ctx.Err()
		}
		return fmt.Errorf("GET /jobs/export: stream cut short: %w: %v", ErrUnavailable, err)
	}
	return nil
}
