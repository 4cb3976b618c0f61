package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// pillStore returns a SQLite file where a fingerprint is quarantined, and
// the fingerprint: three jobs of one payload panic, one crash quarantines
// it, and the job that crashed and the others of it are held.
func pillStore(t *testing.T) (string, string) {
	t.Helper()
	path := sqlitetest.Path(t)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{
		Queues:       map[string]engine.QueueConfig{"q": {Concurrency: 1}},
		PollInterval: 10 * time.Millisecond, MaintenanceInterval: 20 * time.Millisecond,
		CrashLimit: 1, CrashBackoff: func(int) time.Duration { return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "pill", Handler: func(context.Context, *engine.Job) error { panic("poison") }}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"P-1", "P-2", "P-3"} {
		if _, err := e.Enqueue(context.Background(), engine.EnqueueParams{ID: id, Queue: "q", Kind: "pill", Args: map[string]string{"poison": "yes"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var fp string
	for {
		page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateQuarantined}}, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) == 3 {
			fp = page.Jobs[0].Fingerprint
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 jobs held", len(page.Jobs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path, fp
}

// TestJobsReleaseSaysTheFingerprintStays: releasing one held job runs it
// again, and the command says that its fingerprint stays quarantined with
// its other jobs held, and that the job runs on probation.
func TestJobsReleaseSaysTheFingerprintStays(t *testing.T) {
	t.Setenv("SLUICE_API", "")
	path, fp := pillStore(t)
	t.Setenv("SLUICE_STORE", "sqlite://"+path)
	code, out, stderr := runCLI(t, "", "jobs", "release", "P-2")
	if code != 0 || !strings.Contains(out, "released P-2: now available") ||
		!strings.Contains(out, "its fingerprint "+fp+" stays quarantined: its 2 other held job(s) keep waiting (sluice quarantine release '"+fp+"' lifts it)") ||
		!strings.Contains(out, "P-2 runs on probation: its next crash quarantines it again") {
		t.Fatalf("jobs release: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ = runCLI(t, "", "quarantine", "list"); code != 0 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(fp)+`\s+pill\s+quarantined\s`).MatchString(out) {
		t.Fatalf("the fingerprint after the release:\n%s", out)
	}
}

// TestJobsListAndShowSayWhatIsThere: an empty list says so, and a
// workflow job's sheet lists its steps.
func TestJobsListAndShowSayWhatIsThere(t *testing.T) {
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "sqlite://"+workflowDeadStore(t))
	code, out, stderr := runCLI(t, "", "jobs", "list", "-q", "queue:nowhere")
	if code != 0 || out != "" || strings.TrimSpace(stderr) != "no job matches queue:nowhere" {
		t.Fatalf("empty jobs list: exit %d %q %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "jobs", "show", "W-1")
	if code != 0 || !strings.Contains(out, "steps (4):") ||
		!regexp.MustCompile(`(?m)^  1\s+step1\s+completed\s+attempts 1`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  4\s+step4\s+failed\s+attempts 1.*step 4 broke`).MatchString(out) {
		t.Fatalf("jobs show of a workflow: exit %d\n%s%s", code, out, stderr)
	}
}

// TestBulkWaitSaysTheOperationCarriesOn: following an operation over the
// API says that it does not depend on the command.
func TestBulkWaitSaysTheOperationCarriesOn(t *testing.T) {
	path := deadStore(t, 0, 2)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{MaintenanceInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{}))
	defer hs.Close()
	t.Setenv("SLUICE_STORE", "")
	t.Setenv("SLUICE_API", "")
	code, out, stderr := runCLI(t, "", "bulk", "retry", "--api", hs.URL, "--state", "archived", "--yes", "--wait", "-o", "json")
	var op engine.Operation
	if code != 0 || json.Unmarshal([]byte(out), &op) != nil {
		t.Fatalf("bulk --wait: exit %d\n%s%s", code, out, stderr)
	}
	want := "operation " + op.ID + " runs on the server: it carries on if this command stops or the server goes away"
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "sluice operations show "+op.ID+" --api '"+hs.URL+"'") {
		t.Fatalf("bulk --wait says:\n%s", stderr)
	}
}

func TestServeHelpNamesTokenLength(t *testing.T) {
	code, out, _ := runCLI(t, "", "serve", "--help")
	if code != 0 || !strings.Contains(out, "each\ntoken 16 characters or more") {
		t.Fatalf("serve --help:\n%s", out)
	}
}
