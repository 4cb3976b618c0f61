package cli

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/demo"
	"github.com/sluicehq/sluice/internal/pgcluster"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// TestDemoStoreFlag: `sluice demo --store URL` runs the demo on the store
// a URL names, migrating it itself (a fresh SQLite file, an empty
// PostgreSQL schema), and seeds it once.
func TestDemoStoreFlag(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "demo.db") }},
		{"postgres", func(t *testing.T) string {
			u, _ := pgcluster.SharedStoreURL(t)
			return u
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := tc.store(t)
			// A store that cannot be opened fails the test before the demo runs.
			openStore(t, u)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out syncBuffer
			exit := make(chan int, 1)
			go func() {
				exit <- run(ctx, []string{"demo", "--store", u, "--plain", "--refresh", "50ms", "--trickle", "20ms"}, &out, &out)
			}()
			completed := regexp.MustCompile(`completed [1-9]`)
			deadline := time.Now().Add(60 * time.Second)
			for !completed.MatchString(out.String()) {
				if time.Now().After(deadline) {
					t.Fatalf("no job completed after 60s:\n%s", out.String())
				}
				select {
				case code := <-exit:
					t.Fatalf("demo exited %d before a job completed:\n%s", code, out.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			cancel()
			select {
			case code := <-exit:
				if code != 0 {
					t.Errorf("demo exit %d:\n%s", code, out.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("demo did not stop")
			}
			s := openStore(t, u)
			if ok, err := demo.Seeded(context.Background(), s); err != nil || !ok {
				t.Errorf("Seeded after the demo on %s = %v, %v", tc.name, ok, err)
			}
		})
	}
}

func TestDemoDbAndStoreExclusive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out syncBuffer
	code := run(context.Background(), []string{"demo", "--plain", "--db", filepath.Join(dir, "a.db"),
		"--store", "sqlite://" + filepath.Join(dir, "b.db")}, &out, &out)
	if code == 0 {
		t.Fatalf("demo with --db and --store exited 0:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "db") || !strings.Contains(out.String(), "store") {
		t.Errorf("the refusal does not name both flags:\n%s", out.String())
	}
}

func TestDemoDbRefusesOtherBackends(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	code := run(context.Background(), []string{"demo", "--plain", "--db", "postgres://root@127.0.0.1:1/x"}, &out, &out)
	if code == 0 || !strings.Contains(out.String(), "use --store") {
		t.Errorf("demo --db postgres://: exit %d, want a refusal naming --store:\n%s", code, out.String())
	}
}

// openStore opens (creating and migrating) the store a URL names, of any
// backend, closed when t ends.
func openStore(t testing.TB, storeURL string) backend.Store {
	t.Helper()
	s, err := storeurl.OpenMigrating(context.Background(), storeURL, nil)
	if err != nil {
		t.Fatalf("open store %s: %v", redact.URL(storeURL), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
