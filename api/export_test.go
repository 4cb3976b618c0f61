package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// exportJobCount spans three pages of the export (MaxListLimit each).
const exportJobCount = 2*engine.MaxListLimit + 50

// newExportEngine is an engine over a SQLite file holding exportJobCount
// jobs, a tenth of them on queue mail, each with a payload.
func newExportEngine(t *testing.T) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]engine.EnqueueParams, exportJobCount)
	for i := range ps {
		q := "billing"
		if i%10 == 0 {
			q = "mail"
		}
		ps[i] = engine.EnqueueParams{ID: fmt.Sprintf("job-%04d", i), Queue: q, Kind: "charge",
			Payload: json.RawMessage(fmt.Sprintf(`{"customer":%d,"note":"%s"}`, i, strings.Repeat("n", 200)))}
	}
	if _, err := e.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	return e
}

// readExport reads an export answer's lines as jobs.
func readExport(t *testing.T, body string) []*engine.Job {
	t.Helper()
	var out []*engine.Job
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var j engine.Job
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil || j.ID == "" {
			t.Fatalf("line %q is not a job: %v", sc.Text(), err)
		}
		out = append(out, &j)
	}
	return out
}

// TestExportRoles holds GET /jobs/export to the job list's role rules
// and GET /jobs/{id}'s rule for payloads: a viewer's export has none, a
// viewer asking for them is refused, an inspector gets them; a bad
// query is a 400 that says what is wrong.
func TestExportRoles(t *testing.T) {
	t.Parallel()
	srv := NewServer(newExportEngine(t), ServerOptions{Tokens: testTokens})
	for _, tc := range []struct {
		name     string
		query    string
		role     engine.Role
		status   int
		jobs     int
		payloads bool
		says     string
	}{
		{name: "viewer", role: engine.RoleViewer, status: 200, jobs: exportJobCount},
		{name: "viewer, one queue", query: "?queue=mail", role: engine.RoleViewer, status: 200, jobs: (exportJobCount + 9) / 10},
		{name: "viewer, the q grammar", query: "?q=queue:mail%20kind:charge", role: engine.RoleViewer, status: 200, jobs: (exportJobCount + 9) / 10},
		{name: "viewer asks for payloads", query: "?include_payload=true", role: engine.RoleViewer, status: 403, says: "may not read payloads"},
		{name: "viewer filters on payload", query: "?q=payload.customer:3", role: engine.RoleViewer, status: 403, says: "filter on payload"},
		{name: "inspector with payloads", query: "?queue=mail&include_payload=true", role: engine.RoleInspector, status: 200, jobs: (exportJobCount + 9) / 10, payloads: true},
		{name: "inspector, payload filter", query: "?q=payload.customer:30&include_payload=1", role: engine.RoleInspector, status: 200, jobs: 1, payloads: true},
		{name: "nothing matches", query: "?queue=none", role: engine.RoleViewer, status: 200, jobs: 0},
		{name: "unknown state", query: "?state=zombie", role: engine.RoleViewer, status: 400, says: "zombie"},
		{name: "bad query grammar", query: "?q=state:", role: engine.RoleViewer, status: 400, says: "state"},
		{name: "bad include_payload", query: "?include_payload=perhaps", role: engine.RoleInspector, status: 400, says: "include_payload"},
		{name: "a cursor is not taken", query: "?cursor=abc", role: engine.RoleViewer, status: 400, says: "cursor"},
		{name: "no token", status: 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := send(t, srv, req{method: "GET", path: "/api/v1/jobs/export" + tc.query, token: tokenOf(tc.role)})
			wantStatus(t, w, tc.status)
			if tc.status != 200 {
				if !strings.Contains(w.Body.String(), tc.says) {
					t.Errorf("answer %s does not say %q", w.Body.String(), tc.says)
				}
				return
			}
			if ct := w.Header().Get("Content-Type"); ct != ExportContentType {
				t.Errorf("Content-Type %q, want %q", ct, ExportContentType)
			}
			jobs := readExport(t, w.Body.String())
			if len(jobs) != tc.jobs {
				t.Fatalf("%d jobs, want %d", len(jobs), tc.jobs)
			}
			seen := map[string]bool{}
			for _, j := range jobs {
				if seen[j.ID] {
					t.Errorf("job %s twice", j.ID)
				}
				seen[j.ID] = true
				if got := len(j.Payload) > 0; got != tc.payloads {
					t.Fatalf("job %s: payload %s, want one: %v", j.ID, j.Payload, tc.payloads)
				}
			}
		})
	}
}

// gatedControl holds ListJobs calls after the first until gate closes, and
// fails the call numbered failAt (from 1) when it is set.
type gatedControl struct {
	engine.Control
	calls  atomic.Int32
	gate   chan struct{}
	failAt int32
}

func (g *gatedControl) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	n := g.calls.Add(1)
	if n > 1 && g.gate != nil {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if n == g.failAt {
		return nil, fmt.Errorf("list jobs: %w", engine.ErrClosed)
	}
	return g.Control.ListJobs(ctx, p)
}

// TestExportStreams shows the export reaching the client while the server
// has not yet read the rest of the store: the server's second page waits
// until the client has read the first job, which would never happen if
// the answer were written whole at the end. Client.ExportJobs then gets
// every job, in the engine's order.
func TestExportStreams(t *testing.T) {
	t.Parallel()
	e := newExportEngine(t)
	g := &gatedControl{Control: e, gate: make(chan struct{})}
	hs := httptest.NewServer(NewServer(g, ServerOptions{}))
	t.Cleanup(hs.Close)
	c := NewClient(hs.URL, "", ClientOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var want []string
	if err := engine.ExportJobs(ctx, e, engine.ExportJobsParams{}, func(j *engine.Job) error {
		want = append(want, j.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := c.ExportJobs(ctx, engine.ExportJobsParams{}, func(j *engine.Job) error {
		if len(got) == 0 {
			close(g.gate) // the first job is here: let the server read on
		}
		got = append(got, j.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("client export differs from the engine's: %d jobs against %d", len(got), len(want))
	}
	if len(got) != exportJobCount {
		t.Fatalf("%d jobs, want %d", len(got), exportJobCount)
	}
}

// TestExportFailsMidStream: a store failing after the first page ends the
// stream with an error line (the 200 is sent by then), and the client
// returns that error, not a short export that looks whole.
func TestExportFailsMidStream(t *testing.T) {
	t.Parallel()
	g := &gatedControl{Control: newExportEngine(t), failAt: 2}
	srv := NewServer(g, ServerOptions{})
	w := send(t, srv, req{method: "GET", path: "/api/v1/jobs/export"})
	wantStatus(t, w, 200)
	lines := strings.Split(strings.TrimSuffix(w.Body.String(), "\n"), "\n")
	if len(lines) != engine.MaxListLimit+1 {
		t.Fatalf("%d lines, want a page and the error", len(lines))
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, `{"error":`) || !strings.Contains(last, "closed") {
		t.Fatalf("last line %s is not the error", last)
	}

	g2 := &gatedControl{Control: g.Control, failAt: 2}
	hs := httptest.NewServer(NewServer(g2, ServerOptions{}))
	t.Cleanup(hs.Close)
	n := 0
	err := NewClient(hs.URL, "", ClientOptions{}).ExportJobs(context.Background(), engine.ExportJobsParams{}, func(*engine.Job) error {
		n++
		return nil
	})
	var apiErr *Error
	if !errors.As(err, &apiErr) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("client err = %v, want the server's error", err)
	}
	if n != engine.MaxListLimit {
		t.Errorf("client handed on %d jobs before the error, want %d", n, engine.MaxListLimit)
	}
}

// TestExportClientRefused: the client's refusals are the API's errors.
func TestExportClientRefused(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(NewServer(newExportEngine(t), ServerOptions{Tokens: testTokens}))
	t.Cleanup(hs.Close)
	c := NewClient(hs.URL, tokenOf(engine.RoleViewer), ClientOptions{})
	err := c.ExportJobs(context.Background(), engine.ExportJobsParams{WithPayload: true}, func(*engine.Job) error { return nil })
	if !errors.Is(err, ErrForbidden) {
		t.Fatalf("err = %v, want ErrForbidden", err)
	}
	if !strings.Contains(err.Error(), "payloads") {
		t.Fatalf("err = %v, want it to name payloads", err)
	}
}

// TestAppendJobLineIsEncodingJSON: an export's line is encoding/json's
// bytes for the job, listed or read whole, as every other answer's are.
func TestAppendJobLineIsEncodingJSON(t *testing.T) {
	t.Parallel()
	e := newExportEngine(t)
	ctx := context.Background()
	page, err := e.ListJobs(ctx, engine.ListJobsParams{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	jobs := page.Jobs
	d, err := e.GetJob(ctx, "job-0007", true)
	if err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, d.Job, &engine.Job{ID: "odd \u2028 <&> \x1b", Tags: []string{"a"}})
	for _, j := range jobs {
		if got, want := string(AppendJobLine(nil, j)), string(marshalBody(j)); got != want {
			t.Errorf("job %s:\n got %s\nwant %s", j.ID, got, want)
		}
	}
}
