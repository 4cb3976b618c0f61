package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// archiveQueuesOf resolves a command's settings as the root does and
// returns its --archive-queues.
func archiveQueuesOf(t *testing.T, env map[string]string, args ...string) []string {
	t.Helper()
	root := newRootEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Fatalf("find %v: %v", args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("flags %v: %v", rest, err)
	}
	cmd.SetContext(context.Background())
	if err := root.PersistentPreRunE(cmd, nil); err != nil {
		t.Fatalf("settings of %v: %v", args, err)
	}
	qs, err := cmd.Flags().GetStringSlice("archive-queues")
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return qs
}

// TestArchiveQueuesSettings: a queue opts into the cold archive by the
// flag of serve, worker, demo and tui, by SLUICE_ARCHIVE_QUEUES and by
// the config file, the flag beating the file.
func TestArchiveQueuesSettings(t *testing.T) {
	t.Parallel()
	file := writeConfig(t, `
archive-queues: [billing]
worker:
  archive-queues: [billing, audit]
`)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"serve from the top level", nil, []string{"serve", "--config", file}, []string{"billing"}},
		{"worker from its section", nil, []string{"worker", "--config", file}, []string{"billing", "audit"}},
		{"demo's flag beats the file", nil, []string{"demo", "--config", file, "--archive-queues", "email"}, []string{"email"}},
		{"tui from the environment", map[string]string{"SLUICE_ARCHIVE_QUEUES": "reports"}, []string{"tui"}, []string{"reports"}},
		{"serve without", nil, []string{"serve"}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := archiveQueuesOf(t, tc.env, tc.args...); !slices.Equal(got, tc.want) {
				t.Fatalf("archive queues %q, want %q", got, tc.want)
			}
		})
	}
}

// TestArchiveQueuesStoreURL: the flag becomes the PostgreSQL store's
// archive_queues (added to what the URL has), and a store without a cold
// archive refuses it with a capability error instead of ignoring it.
func TestArchiveQueuesStoreURL(t *testing.T) {
	t.Parallel()
	a := archiveQueuesFlag{queues: []string{"billing", " audit "}}
	got, err := a.storeURL("postgres://root@127.0.0.1:5432/test?schema=s&archive_queues=old")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if q := u.Query(); q.Get("archive_queues") != "old,billing,audit" || q.Get("schema") != "s" {
		t.Fatalf("store url %s", got)
	}
	for _, raw := range []string{"sqlite://jobs.db", "redis://127.0.0.1:6379/0"} {
		if _, err := a.storeURL(raw); !errors.Is(err, engine.ErrUnsupported) || !strings.Contains(err.Error(), "has no cold archive") {
			t.Errorf("%s: %v, want a capability error", raw, err)
		}
	}
	if got, err := (&archiveQueuesFlag{}).storeURL("sqlite://jobs.db"); err != nil || got != "sqlite://jobs.db" {
		t.Errorf("no flag: %q %v", got, err)
	}
}

// TestArchiveCommands: on a real PostgreSQL store whose billing queue
// opted in by the flag, the retention sweep archives billing's jobs (not
// email's), and sluice archive list and show read them back by queue,
// kind and page; against SQLite both say the store has no cold archive.
func TestArchiveCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, _ := pgtest.SchemaURL(t)
	flag := archiveQueuesFlag{queues: []string{"billing"}}
	openURL, err := flag.storeURL(base + "&migrate=true")
	if err != nil {
		t.Fatal(err)
	}
	s, err := storeurl.Open(ctx, openURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{NoMaintenance: true,
		Retention: map[engine.State]time.Duration{engine.StateCancelled: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []engine.EnqueueParams{
		{ID: "B-0", Queue: "billing", Kind: "charge"}, {ID: "B-1", Queue: "billing", Kind: "charge"},
		{ID: "B-2", Queue: "billing", Kind: "refund"}, {ID: "E-0", Queue: "email", Kind: "charge"},
	}
	for _, p := range jobs {
		p.Payload = []byte(`{"n":1}`)
		p.Delay = time.Hour // scheduled: cancellable, and no worker takes it
		if _, err := e.Enqueue(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Cancel(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		e.RunMaintenance(ctx)
		page, err := e.ListJobs(ctx, engine.ListJobsParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweep left %d jobs", len(page.Jobs))
		}
	}

	listIDs := func(args ...string) ([]string, string) {
		t.Helper()
		code, out, errs := runCLI(t, "", append([]string{"archive", "list", "--store", base, "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("archive list %v: exit %d: %s", args, code, errs)
		}
		var page struct {
			Jobs []struct {
				ID        string    `json:"id"`
				Queue     string    `json:"queue"`
				State     string    `json:"state"`
				EvictedAt time.Time `json:"evicted_at"`
			} `json:"jobs"`
			Next string `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatalf("archive list %v: %v\n%s", args, err, out)
		}
		var ids []string
		for _, j := range page.Jobs {
			if j.EvictedAt.IsZero() || j.State != "cancelled" {
				t.Errorf("archived row %+v", j)
			}
			ids = append(ids, j.ID)
		}
		slices.Sort(ids)
		return ids, page.Next
	}
	if got, _ := listIDs(); !slices.Equal(got, []string{"B-0", "B-1", "B-2"}) {
		t.Fatalf("archive %v, want billing's jobs only", got)
	}
	if got, _ := listIDs("--queue", "email"); len(got) != 0 {
		t.Fatalf("email, which did not opt in, was archived: %v", got)
	}
	if got, _ := listIDs("--kind", "refund"); !slices.Equal(got, []string{"B-2"}) {
		t.Fatalf("kind refund: %v", got)
	}
	first, next := listIDs("--queue", "billing", "--limit", "2")
	if len(first) != 2 || next == "" {
		t.Fatalf("first page %v, next %q", first, next)
	}
	rest, _ := listIDs("--queue", "billing", "--limit", "2", "--cursor", next)
	if all := slices.Sorted(slices.Values(append(first, rest...))); !slices.Equal(all, []string{"B-0", "B-1", "B-2"}) {
		t.Fatalf("pages %v then %v", first, rest)
	}

	code, out, errs := runCLI(t, "", "archive", "list", "--store", base)
	if code != 0 || !strings.Contains(out, "EVICTED") || !strings.Contains(out, "B-2") || !strings.Contains(out, "refund") {
		t.Fatalf("table: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "", "archive", "show", "B-0", "--store", base)
	if code != 0 || !strings.Contains(out, "evicted") || !strings.Contains(out, "billing") || !strings.Contains(out, `{"n": 1}`) && !strings.Contains(out, `{"n":1}`) {
		t.Fatalf("show: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "", "archive", "show", "E-0", "--store", base); code == 0 || !strings.Contains(errs, "not found") {
		t.Fatalf("show of a job never archived: exit %d: %s", code, errs)
	}

	lite := "sqlite://" + sqlitetest.Path(t)
	ls, err := storeurl.Open(ctx, lite, nil) // created, so only the archive is missing
	if err != nil {
		t.Fatal(err)
	}
	ls.Close()
	for _, args := range [][]string{{"archive", "list", "--store", lite}, {"archive", "show", "B-0", "--store", lite}} {
		if code, _, errs := runCLI(t, "", args...); code == 0 || !strings.Contains(errs, "has no cold archive") {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
	}
}
