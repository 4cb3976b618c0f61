package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/cmdline"
)

// runCLI runs the sluice command in process with stdin as its input.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot()
	root.SetIn(strings.NewReader(stdin))
	code = cmdline.Run(context.Background(), root, "sluice", args, &out, &errb)
	return code, out.String(), errb.String()
}

// deadStore returns a SQLite file holding billing jobs B-00… and email
// jobs E-00… that all died (archived after one failed attempt).
func deadStore(t testing.TB, billing, email int) string {
	t.Helper()
	path := sqlitetest.Path(t)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{
		Queues:       map[string]engine.QueueConfig{"billing": {Concurrency: 4}, "email": {Concurrency: 4}},
		PollInterval: 10 * time.Millisecond, MaintenanceInterval: 20 * time.Millisecond, NoMaintenance: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "charge", Handler: func(context.Context, *engine.Job) error {
		return errors.New("card declined")
	}}); err != nil {
		t.Fatal(err)
	}
	var ps []engine.EnqueueParams
	for i := range billing {
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("B-%02d", i), Queue: "billing", Kind: "charge", MaxAttempts: 1, Args: map[string]int{"customer": i}})
	}
	for i := range email {
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("E-%02d", i), Queue: "email", Kind: "charge", MaxAttempts: 1})
	}
	if _, err := e.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) == billing+email {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs died", len(page.Jobs), billing+email)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeRefusesOpenListenWithoutTokens(t *testing.T) {
	t.Setenv("SLUICE_TOKENS", "")
	code, _, stderr := runCLI(t, "", "serve", "--store", filepath.Join(t.TempDir(), "x.db"), "--listen", "0.0.0.0:0")
	if code != 1 || !strings.Contains(stderr, "refusing to listen on 0.0.0.0:0 without tokens") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.5:8080": false, "example.com:80": false,
	} {
		if got, err := isLoopback(addr); err != nil || got != want {
			t.Errorf("isLoopback(%s) = %v, %v", addr, got, err)
		}
	}
	if _, err := isLoopback("8080"); err == nil {
		t.Error("a bare port is accepted")
	}
}

func TestServeTokensFromFileOrEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# ops\nmaya:admin:0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_TOKENS", "ci:viewer:fedcba9876543210fedc")
	toks, src, err := loadTokens(file)
	if err != nil || len(toks) != 1 || toks["0123456789abcdef0123"].Name != "maya" || !strings.Contains(src, file) {
		t.Fatalf("file: %v %s %v", toks, src, err)
	}
	toks, src, err = loadTokens("")
	if err != nil || toks["fedcba9876543210fedc"].Role != engine.RoleViewer || src != "SLUICE_TOKENS" {
		t.Fatalf("env: %v %s %v", toks, src, err)
	}
	t.Setenv("SLUICE_TOKENS", "ci:viewer:tiny")
	if _, _, err := loadTokens(""); err == nil || strings.Contains(err.Error(), "tiny") {
		t.Fatalf("bad env tokens: %v", err)
	}
}

func TestControlCommandsOnStore(t *testing.T) {
	path := deadStore(t, 12, 2)
	store := "sqlite://" + path
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "")
	t.Setenv("SLUICE_ACTOR", "maya")

	code, out, stderr := runCLI(t, "", "jobs", "list", "--store", store, "--state", "archived", "-o", "json")
	var page engine.JobPage
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Jobs) != 14 {
		t.Fatalf("jobs list: exit %d %s %s", code, out, stderr)
	}
	// The store from the environment; the flag beats it.
	t.Setenv("SLUICE_STORE", "sqlite://"+filepath.Join(t.TempDir(), "other.db"))
	if code, out, stderr = runCLI(t, "", "jobs", "list", "--store", store, "-q", "queue:email"); code != 0 || strings.Count(out, "email") != 2 {
		t.Fatalf("flag over env: exit %d %s %s", code, out, stderr)
	}
	t.Setenv("SLUICE_STORE", store)
	if code, out, stderr = runCLI(t, "", "jobs", "show", "B-03", "--payload"); code != 0 || !strings.Contains(out, `{"customer":3}`) || !strings.Contains(out, "card declined") {
		t.Fatalf("jobs show: exit %d %s %s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", "jobs", "retry", "B-00"); code != 0 || !strings.Contains(out, "retried B-00: now available") {
		t.Fatalf("jobs retry: exit %d %s %s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", "jobs", "retry", "B-01", "NOPE"); code != 1 || !strings.Contains(out, "not_found") || !strings.Contains(stderr, "1 of 2 failed") {
		t.Fatalf("jobs retry of two: exit %d %s %s", code, out, stderr)
	}

	// Bulk: preview, declined, then run to the end by the command itself.
	if code, out, stderr = runCLI(t, "", "bulk", "retry", "--state", "archived", "--queue", "billing", "--dry-run"); code != 0 || !strings.Contains(out, "would retry 10 job(s)") {
		t.Fatalf("bulk dry run: exit %d %s %s", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, "n\n", "bulk", "retry", "--state", "archived", "--queue", "billing"); code != 1 || !strings.Contains(stderr, "retry 10 job(s) matching state:archived queue:billing (only those in that state by the preview, ") || !strings.Contains(stderr, "aborted") {
		t.Fatalf("declined bulk: exit %d %s", code, stderr)
	}
	if code, out, stderr = runCLI(t, "", "bulk", "retry", "--state", "archived", "--queue", "billing", "--yes"); code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "10 of 10 processed, 10 succeeded") {
		t.Fatalf("bulk: exit %d %s %s", code, out, stderr)
	}
	if code, out, _ = runCLI(t, "", "jobs", "list", "-q", "state:archived queue:billing", "-o", "json"); code != 0 || strings.Contains(out, `"id"`) {
		t.Fatalf("billing jobs left archived: %s", out)
	}
	if code, out, stderr = runCLI(t, "", "operations", "list"); code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "maya") {
		t.Fatalf("operations list: exit %d %s %s", code, out, stderr)
	}

	if code, out, stderr = runCLI(t, "y\n", "jobs", "delete", "E-00"); code != 0 || !strings.Contains(out, "deleted E-00") {
		t.Fatalf("jobs delete: exit %d %s %s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", "queues", "pause", "billing"); code != 0 {
		t.Fatalf("queues pause: exit %d %s %s", code, out, stderr)
	}
	var qs []engine.QueueInfo
	if code, out, _ = runCLI(t, "", "queues", "list", "-o", "json"); code != 0 || json.Unmarshal([]byte(out), &qs) != nil || len(qs) == 0 || qs[0].Name != "billing" || !qs[0].Paused {
		t.Fatalf("queues list: %s", out)
	}
	limitCmds := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"limits", "set", "kind", "charge", "5"}, 0, "limit kind charge: none -> 5"},
		{[]string{"limits", "set", "kind", "charge", "3"}, 0, "limit kind charge: 5 -> 3"},
		{[]string{"limits", "list"}, 0, "charge"},
		{[]string{"limits", "set", "tenant", "x", "1"}, 1, ""},
		{[]string{"limits", "set", "kind", "charge", "-1"}, 1, ""},
		{[]string{"limits", "set", "kind", "charge", "0"}, 0, "limit kind charge: 3 -> none"},
		{[]string{"limits", "set", "kind", "charge", "2", "--key", "customer"}, 0, "limit kind charge per customer: none -> 2"},
		{[]string{"limits", "set", "queue", "billing", "2", "--key", "customer"}, 1, ""},
		{[]string{"limits", "set", "queue", "billing", "0", "--rate", "50", "--per", "1m"}, 0, "limit queue billing: none -> none"},
		{[]string{"limits", "list"}, 0, "50/1m0s"},
		// A new count keeps what no flag names: the rate, the partition.
		{[]string{"limits", "set", "queue", "billing", "4"}, 0, "limit queue billing: none -> 4"},
		{[]string{"limits", "list", "-o", "json"}, 0, `"rate": 50`},
		{[]string{"limits", "set", "kind", "charge", "1"}, 0, "limit kind charge per customer: 2 -> 1"},
		{[]string{"limits", "set", "queue", "billing", "4", "--rate", "0"}, 0, "limit queue billing: 4 -> 4"},
	}
	for _, lc := range limitCmds {
		if code, out, stderr = runCLI(t, "", lc.args...); code != lc.code || !strings.Contains(out, lc.want) {
			t.Fatalf("%s: exit %d %q %s", strings.Join(lc.args, " "), code, out, stderr)
		}
	}
	if code, out, _ = runCLI(t, "", "quarantine", "list"); code != 0 || !strings.HasPrefix(out, "FINGERPRINT") {
		t.Fatalf("quarantine list: %s", out)
	}
	if code, _, stderr = runCLI(t, "", "jobs", "list", "--store", store, "--api", "http://127.0.0.1:1"); code != 1 || !strings.Contains(stderr, "not both") {
		t.Fatalf("both --api and --store: %s", stderr)
	}
	if code, _, stderr = runCLI(t, "", "jobs", "list", "-o", "yaml"); code != 1 || !strings.Contains(stderr, "table or json") {
		t.Fatalf("-o yaml: %s", stderr)
	}
}

func TestControlCommandsOnAPI(t *testing.T) {
	path := deadStore(t, 3, 4)
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
	tokens := map[string]api.Identity{
		"operator-0123456789abcdef": {Name: "ops", Role: engine.RoleOperator},
		"viewer-0123456789abcdef":   {Name: "dash", Role: engine.RoleViewer},
	}
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{Tokens: tokens}))
	defer hs.Close()
	t.Setenv("SLUICE_STORE", "")
	t.Setenv("SLUICE_API", hs.URL)
	t.Setenv("SLUICE_TOKEN", "viewer-0123456789abcdef")
	t.Setenv("SLUICE_ACTOR", "maya")

	code, out, stderr := runCLI(t, "", "jobs", "list", "--state", "archived", "-o", "json")
	var page engine.JobPage
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Jobs) != 7 {
		t.Fatalf("jobs list over the API: exit %d %s %s", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, "", "jobs", "retry", "B-00"); code != 1 || !strings.Contains(stderr, "role viewer may not") {
		t.Fatalf("viewer retry: exit %d %s", code, stderr)
	}
	op := []string{"--token", "operator-0123456789abcdef"} // the flag beats SLUICE_TOKEN
	if code, out, stderr = runCLI(t, "", append([]string{"jobs", "retry", "B-00"}, op...)...); code != 0 {
		t.Fatalf("operator retry: exit %d %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", append([]string{"bulk", "retry", "--state", "archived", "--queue", "email", "--yes", "--wait", "-o", "json"}, op...)...)
	var o engine.Operation
	if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.Status != engine.OperationCompleted || o.Succeeded != 4 || o.CreatedBy != "ops/maya" {
		t.Fatalf("bulk over the API: exit %d %s %s", code, out, stderr)
	}
	if code, out, stderr = runCLI(t, "", append([]string{"operations", "show", o.ID}, op...)...); code != 0 || !strings.Contains(out, "4 of 4 processed") {
		t.Fatalf("operations show: exit %d %s %s", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, "", append([]string{"queues", "pause", "billing"}, op...)...); code != 1 || !strings.Contains(stderr, "needs admin") {
		t.Fatalf("operator pause: exit %d %s", code, stderr)
	}
}
