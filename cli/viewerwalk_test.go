package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// The marker strings of the viewer walk: dataMarker is in the job's
// payload, metadata, edit, signal, step results and replay result, and
// in an operation's selector; errorMarker is in its error text.
const (
	dataMarker  = "Zq7MARKER"
	errorMarker = "Ph0neERR"
)

// walkJobs is what the walk's store holds: a workflow job that waited
// for a signal, failed and was edited, its replay, and a quarantined job.
type walkJobs struct {
	e                  *engine.Engine
	flow, replay, boom string
	operation          string
	fingerprints       []string // every job's real fingerprint
}

// viewerWalkStore builds the walk's jobs on a SQLite file with a
// running engine.
func viewerWalkStore(t *testing.T) *walkJobs {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e, err := engine.New(store, engine.Config{
		Queues:       map[string]engine.QueueConfig{"wf": {Concurrency: 2}},
		PollInterval: 10 * time.Millisecond, MaintenanceInterval: 20 * time.Millisecond,
		CrashLimit: 1, ShutdownTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "flow", MaxAttempts: 1, Handler: func(ctx context.Context, j *engine.Job) error {
		if _, err := engine.Step(ctx, "lookup", func(context.Context) (map[string]string, error) {
			return map[string]string{"card": dataMarker + "-step"}, nil
		}); err != nil {
			return err
		}
		if _, err := engine.WaitSignal(ctx, "approval", time.Hour); err != nil {
			return err
		}
		_, err := engine.Step(ctx, "charge", func(context.Context) (int, error) {
			return 0, errors.New("sms to +1 555 " + errorMarker + " refused")
		})
		return err
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "boom", Handler: func(context.Context, *engine.Job) error {
		panic("boom " + errorMarker)
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })

	w := &walkJobs{e: e, flow: "W-1", boom: "B-1"}
	if _, err := e.EnqueueMany(ctx, []engine.EnqueueParams{
		{ID: w.flow, Queue: "wf", Kind: "flow", Args: map[string]string{"card": dataMarker + "-card"}, Metadata: json.RawMessage(`{"tenant":"` + dataMarker + `-tenant"}`)},
		{ID: w.boom, Queue: "wf", Kind: "boom", Args: map[string]string{"card": dataMarker + "-boom"}},
	}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, w.flow, func(d *engine.JobDetail) bool { return engine.WaitOf(d.Job) != nil })
	if _, err := e.Signal(ctx, w.flow, "approval", json.RawMessage(`{"approved_by":"`+dataMarker+`-signal"}`)); err != nil {
		t.Fatal(err)
	}
	d := waitJob(t, e, w.flow, func(d *engine.JobDetail) bool { return d.Job.State == engine.StateArchived })
	octx := engine.WithActor(ctx, "otto")
	if _, err := e.UpdatePayload(octx, w.flow, json.RawMessage(`{"card":"`+dataMarker+`-edited"}`), d.Job.Version); err != nil {
		t.Fatal(err)
	}
	f, err := e.ReplayFromStep(octx, w.flow, engine.ReplayParams{Step: 3, Result: json.RawMessage(`{"approved_by":"` + dataMarker + `-replay"}`)})
	if err != nil {
		t.Fatal(err)
	}
	w.replay = f.ID
	waitJob(t, e, w.replay, func(d *engine.JobDetail) bool { return d.Job.State == engine.StateArchived })
	waitJob(t, e, w.boom, func(d *engine.JobDetail) bool { return d.Job.State == engine.StateQuarantined })
	// A resolution's note may quote the error: it is hidden as the error
	// is.
	gs, err := e.ErrorGroups(ctx, engine.Filter{Queues: []string{"wf"}})
	if err != nil || len(gs) == 0 {
		t.Fatalf("error groups of wf: %+v %v", gs, err)
	}
	for _, g := range gs {
		if _, err := e.ResolveErrorGroup(octx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "fixed: " + errorMarker}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.Bulk(octx, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{
		States: []engine.State{engine.StateArchived}, Queues: []string{"wf"},
		Payload: []engine.PathMatch{{Path: "card", Value: dataMarker + "-op"}},
		Error:   errorMarker,
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.operation = res.Operation.ID
	for _, id := range []string{w.flow, w.replay, w.boom} {
		d, err := e.GetJob(ctx, id, true)
		if err != nil {
			t.Fatal(err)
		}
		w.fingerprints = append(w.fingerprints, d.Job.Fingerprint)
	}
	// The marker is where the walk looks for it, as an inspector sees.
	d, err = e.GetJob(ctx, w.flow, true)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := json.Marshal(d)
	for _, want := range []string{dataMarker + "-card", dataMarker + "-edited", dataMarker + "-tenant", dataMarker + "-step", dataMarker + "-signal", errorMarker} {
		if !strings.Contains(string(all), want) {
			t.Fatalf("the flow job does not hold %q, the walk would prove nothing: %s", want, all)
		}
	}
	return w
}

func waitJob(t *testing.T, e *engine.Engine, id string, ok func(*engine.JobDetail) bool) *engine.JobDetail {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := e.GetJob(context.Background(), id, true)
		if err == nil && ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never got there: %+v %v", id, d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaks names what of the walk's data text holds.
func (w *walkJobs) leaks(text string, hideErrors bool) []string {
	var out []string
	if strings.Contains(text, dataMarker) {
		out = append(out, "the data marker")
	}
	if hideErrors && strings.Contains(text, errorMarker) {
		out = append(out, "the error marker")
	}
	for _, fp := range w.fingerprints {
		if strings.Contains(text, fp) {
			out = append(out, "fingerprint "+fp)
		}
	}
	return out
}

// TestViewerWalkFindsNoMarker walks every read route of the API and
// every screen of the console over SSH as a viewer, over a job whose
// payload, metadata, edit, signal, step results and replay result hold a
// marker, and finds the marker nowhere, nor a real fingerprint; with
// error text hidden from viewers, the error text's marker is found
// nowhere either. An inspector's walk finds them (the check can fail).
func TestViewerWalkFindsNoMarker(t *testing.T) {
	// The walks mostly wait for repaints (a minute each), and they only
	// read: they run beside each other and the package's other tests.
	t.Parallel()
	w := viewerWalkStore(t)
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprintf("hide errors %v", hide), func(t *testing.T) {
			t.Parallel()
			srv := api.NewServer(w.e, api.ServerOptions{Tokens: map[string]api.Identity{
				"viewer-token-0123456789":    {Name: "vera", Role: engine.RoleViewer},
				"inspector-token-0123456789": {Name: "ines", Role: engine.RoleInspector},
			}, HideErrorsFromViewers: hide})
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)

			seen := w.walkAPI(t, ts.URL, srv.Routes(), "viewer-token-0123456789")
			if l := w.leaks(seen, hide); len(l) > 0 {
				t.Errorf("the viewer's API walk shows %v", l)
			}
			if !hide && !strings.Contains(seen, errorMarker) {
				t.Errorf("error text is hidden from viewers by default")
			}
			// A guessed payload cannot be confirmed: the viewer's
			// fingerprint filter takes only the server's ids, and the
			// fingerprint of the right guess finds nothing.
			guess, err := engine.FingerprintOf("boom", json.RawMessage(`{"card":"`+dataMarker+`-boom"}`))
			if err != nil || guess != w.fingerprints[2] {
				t.Fatalf("the guess %s is not the job's fingerprint %s (%v): the check proves nothing", guess, w.fingerprints[2], err)
			}
			for token, want := range map[string]bool{"viewer-token-0123456789": false, "inspector-token-0123456789": true} {
				r, _ := http.NewRequest("GET", ts.URL+api.Prefix+"/jobs?state=quarantined&q=fingerprint:"+guess, nil)
				r.Header.Set("Authorization", "Bearer "+token)
				res, err := http.DefaultClient.Do(r)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if strings.Contains(string(b), `"id":"`+w.boom+`"`) != want {
					t.Errorf("%s: the guessed fingerprint finds the job: %v, want %v (%d %s)", token, !want, want, res.StatusCode, b)
				}
			}
			if l := w.leaks(w.walkAPI(t, ts.URL, srv.Routes(), "inspector-token-0123456789"), true); len(l) < 2 {
				t.Errorf("the inspector's walk finds only %v: the walk cannot fail", l)
			}

			screens := w.walkConsole(t, srv, engine.RoleViewer)
			if l := w.leaks(screens, hide); len(l) > 0 {
				t.Errorf("the viewer's console shows %v:\n%s", l, tailText(screens, 4000))
			}
			if hide {
				return
			}
			if l := w.leaks(w.walkConsole(t, srv, engine.RoleInspector), true); len(l) < 2 {
				t.Errorf("the inspector's console walk finds only %v: the walk cannot fail", l)
			}
		})
	}
}

// walkAPI sends every GET route as token, over each job, and returns all
// the answers. It fails the test when a GET route was not visited.
func (w *walkJobs) walkAPI(t *testing.T, base string, routes []string, token string) string {
	t.Helper()
	var all strings.Builder
	visited := map[string]bool{}
	get := func(pattern, path string, stream bool) string {
		t.Helper()
		visited[pattern] = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if stream {
			var c2 context.CancelFunc
			ctx, c2 = context.WithTimeout(ctx, 300*time.Millisecond)
			defer c2()
		}
		r, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil && !stream {
			t.Fatalf("GET %s: %v", path, err)
		}
		if res.StatusCode >= 500 {
			t.Errorf("GET %s: %d %s", path, res.StatusCode, b)
		}
		all.WriteString(fmt.Sprintf("GET %s %d\n%s\n", path, res.StatusCode, b))
		for k, vs := range res.Header {
			all.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
		}
		return string(b)
	}
	p := api.Prefix
	for _, s := range engine.AllStates {
		get("GET "+p+"/jobs", p+"/jobs?state="+string(s)+"&limit=200", false)
	}
	get("GET "+p+"/jobs/counts", p+"/jobs/counts", false)
	get("GET "+p+"/jobs/export", p+"/jobs/export", false)
	get("GET "+p+"/jobs/export", p+"/jobs/export?include_payload=true", false)
	get("GET "+p+"/jobs/counts/filter", p+"/jobs/counts/filter?state=archived", false)
	for _, id := range []string{w.flow, w.replay, w.boom} {
		get("GET "+p+"/jobs/{id}", p+"/jobs/"+url.PathEscape(id), false)
		get("GET "+p+"/jobs/{id}", p+"/jobs/"+url.PathEscape(id)+"?include_payload=true", false)
		for step := 1; step <= 3; step++ {
			get("GET "+p+"/jobs/{id}/replay", p+"/jobs/"+url.PathEscape(id)+"/replay?step="+fmt.Sprint(step), false)
		}
	}
	get("GET "+p+"/error-groups", p+"/error-groups", false)
	get("GET "+p+"/operations", p+"/operations", false)
	get("GET "+p+"/audit", p+"/audit?limit=500", false)
	get("GET "+p+"/operations/{id}", p+"/operations/"+url.PathEscape(w.operation), false)
	q := get("GET "+p+"/quarantine", p+"/quarantine", false)
	get("GET "+p+"/queues", p+"/queues", false)
	get("GET "+p+"/limits", p+"/limits", false)
	get("GET "+p+"/schedules", p+"/schedules", false)
	get("GET "+p+"/healthz", p+"/healthz", false)
	get("GET "+p+"/readyz", p+"/readyz", false)
	get("GET "+p+"/meta", p+"/meta", false)
	get("GET /metrics", "/metrics", false)
	get("GET "+p+"/events", p+"/events", true)

	// The quarantine list leads to its jobs by the fingerprint it shows.
	var qr struct {
		Fingerprints []engine.Fingerprint `json:"fingerprints"`
	}
	if err := json.Unmarshal([]byte(q), &qr); err != nil || len(qr.Fingerprints) != 1 {
		t.Fatalf("quarantine: %s %v", q, err)
	}
	page := get("GET "+p+"/jobs", p+"/jobs?state=quarantined&q="+url.QueryEscape("fingerprint:"+qr.Fingerprints[0].Fingerprint), false)
	if !strings.Contains(page, `"id":"`+w.boom+`"`) {
		t.Errorf("the quarantine's fingerprint does not find its job: %s", page)
	}

	for _, rt := range routes {
		if strings.HasPrefix(rt, "GET ") && !visited[rt] {
			t.Errorf("the walk does not visit %s", rt)
		}
	}
	return all.String()
}

// walkConsole opens the console over SSH as role and visits every
// screen: each state's tab, each job's sheet, the quarantine (and its
// jobs), operations, queues, error groups and help. It returns all the
// session showed.
func (w *walkJobs) walkConsole(t *testing.T, srv *api.Server, role engine.Role) string {
	t.Helper()
	dir := t.TempDir()
	key := newTestSSHKey(t, "vera")
	keysFile := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(keysFile, []byte(`sluice-role="`+string(role)+`" `+key.line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &serveOptions{ssh: "127.0.0.1:0", sshKeys: keysFile, sshHostKey: filepath.Join(dir, "host")}
	sc, err := startSSHConsole(o, srv, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.stop() })
	term := openSSHTerm(t, sc.ln.Addr().String(), key)
	term.waitFor("vera (" + string(role) + ")")
	// Each screen is drawn whole once (a resize repaints everything), so
	// a value on it is in the transcript in one piece, not as the cells
	// a redraw changed.
	width := 160
	repaint := func() {
		width = 321 - width // 160, 161, 160...
		if err := term.sess.WindowChange(50, width); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// A lone escape and the next key in one read are one key (alt+key):
	// the next key waits until the escape is surely read alone.
	esc := func() {
		term.keys("\x1b")
		time.Sleep(time.Second)
	}
	command := func(c string) {
		term.keys(":")
		term.keys(c, "\r")
		repaint()
	}
	for _, s := range engine.AllStates {
		command(string(s))
	}
	for _, job := range []struct {
		id    string
		state engine.State
	}{{w.flow, engine.StateArchived}, {w.replay, engine.StateArchived}, {w.boom, engine.StateQuarantined}} {
		command(string(job.state))
		command("filter id:" + job.id)
		// A list that loads after the repaint changes a few cells ("1 of
		// 2" to "1 of 1" is one): repaint until a whole screen shows it.
		for deadline := time.Now().Add(time.Minute); ; {
			at := len(term.text())
			repaint()
			if strings.Contains(term.text()[at:], "1 of 1") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the filter id:%s never showed its job:\n%s", job.id, tailText(term.text(), 3000))
			}
		}
		term.keys("\r") // the sheet
		repaint()
		for range 6 { // down the sheet, and into its links
			term.keys("\x1b[B")
		}
		repaint()
		term.keys("\r")
		repaint()
		command("jobs") // the plain list, the sheet closed
	}
	command("quarantine")
	// The list loads before enter opens its row (an enter in the gap
	// finds no row, on a loaded machine): a whole repaint shows the
	// quarantine's header and the boom kind's row.
	for deadline := time.Now().Add(time.Minute); ; {
		at := len(term.text())
		repaint()
		if shown := term.text()[at:]; strings.Contains(shown, "FINGERPRINT") && strings.Contains(shown, " boom ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quarantine never showed its row:\n%s", tailText(term.text(), 3000))
		}
	}
	mark := len(term.text())
	term.keys("\r") // the quarantined fingerprint's jobs, by the id shown
	repaint()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if after := term.text()[mark:]; strings.Contains(after, "fingerprint:") && strings.Contains(after, w.boom) && strings.Contains(after, "1 of 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quarantine does not lead to its job:\n%s", tailText(term.text(), 3000))
		}
	}
	esc()
	for _, c := range []string{"operations", "queues", "schedules", "errors", "help"} {
		command(c)
		term.keys("\r")
		repaint()
		esc()
	}
	// Out of whatever is open, then quit; on a loaded machine a key can
	// land before the screen it was meant for.
	for i := 0; ; i++ {
		term.keys("\x1b", "\x1b", "q")
		select {
		case <-term.done:
			return term.text()
		case <-time.After(3 * time.Second):
		}
		if i == 5 {
			t.Fatalf("the session did not end after q:\n%s", tailText(term.text(), 2000))
		}
	}
}
