package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// withAuth adds basic auth to every request, as the service's operators'
// tools would.
type withAuth struct{ user, pass string }

func (a withAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(a.user, a.pass)
	return http.DefaultTransport.RoundTrip(r)
}

func startService(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "server.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	log := slog.New(slog.DiscardHandler)
	e, err := newEngine(store, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	srv := httptest.NewServer(newMux(e, Operators{"ops": "pw"}, log))
	t.Cleanup(srv.Close)
	return srv
}

func order(t *testing.T, srv *httptest.Server, item string) string {
	t.Helper()
	resp, err := http.Post(srv.URL+"/orders?item="+item, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /orders: %d %s", resp.StatusCode, body)
	}
	return strings.TrimSpace(string(body))
}

// waitState waits until job id is in state want.
func waitState(t *testing.T, ctl engine.Control, id string, want engine.State) *engine.JobDetail {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		d, err := ctl.GetJob(context.Background(), id, false)
		if err != nil {
			t.Fatal(err)
		}
		if d.Job.State == want {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after 60s, want %s", id, d.Job.State, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServiceRoutesAndMiddleware(t *testing.T) {
	t.Parallel()
	srv := startService(t)

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "orders service") {
		t.Errorf("GET /: %d %s", resp.StatusCode, body)
	}

	// The API answers only behind the service's middleware.
	resp, err = http.Get(srv.URL + api.Prefix + "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("GET /jobs without credentials: %d, request id %q; want 401 with an id", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	bad := &http.Client{Transport: withAuth{"ops", "wrong"}}
	resp, err = bad.Get(srv.URL + api.Prefix + "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /jobs with a wrong password: %d, want 401", resp.StatusCode)
	}
	good := &http.Client{Transport: withAuth{"ops", "pw"}}
	resp, err = good.Get(srv.URL + api.Prefix + "/jobs?state=completed")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"jobs"`) {
		t.Errorf("GET /jobs as an operator: %d %s", resp.StatusCode, body)
	}
}

// A Go client through the middleware is an engine.Control: the service's
// jobs run, and an operator retries the dead one.
func TestServiceControlThroughMiddleware(t *testing.T) {
	t.Parallel()
	srv := startService(t)
	var ctl engine.Control = api.NewClient(srv.URL, "", api.ClientOptions{
		HTTPClient: &http.Client{Transport: withAuth{"ops", "pw"}},
	})

	shipped := order(t, srv, "book")
	waitState(t, ctl, shipped, engine.StateCompleted)

	dead := order(t, srv, "unobtainium")
	d := waitState(t, ctl, dead, engine.StateArchived)
	if d.Job.TerminalReason != engine.ReasonSkipped {
		t.Errorf("dead order's reason %q, want skipped", d.Job.TerminalReason)
	}
	job, err := ctl.Retry(context.Background(), dead, engine.RetryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.ID != dead {
		t.Errorf("retried %s, want %s", job.ID, dead)
	}
	// It dies again (still out of stock); the retry is on its timeline,
	// by the API's identity without tokens.
	d = waitState(t, ctl, dead, engine.StateArchived)
	var by string
	for _, ev := range d.Timeline {
		if ev.Kind == engine.EventRetried {
			by = ev.Actor
		}
	}
	if by != "local" {
		t.Errorf("retry on the timeline by %q, want local; timeline %+v", by, d.Timeline)
	}
}
