package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// heldStore returns a SQLite file with three charge jobs on billing, one
// of them running (claimed under a lease no worker renews), under a kind
// limit of 1, so the other two are held back by it; and one send job on
// mail that nothing holds. It returns the engine too, for a server over
// the store.
func heldStore(t *testing.T) (string, *engine.Engine) {
	t.Helper()
	ctx := context.Background()
	path := sqlitetest.Path(t)
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var ins []*backend.JobInsertParams
	for _, j := range []struct{ id, queue, kind string }{
		{"charge-1", "billing", "charge"}, {"charge-2", "billing", "charge"}, {"charge-3", "billing", "charge"},
		{"send-1", "mail", "send"},
	} {
		ins = append(ins, &backend.JobInsertParams{ID: j.id, Queue: j.queue, Kind: j.kind, SchemaVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
		t.Fatal(err)
	}
	res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "billing", WorkerID: "w", LeaseID: "L1", Limit: 1,
		Kinds: map[string]int{"charge": 1}, LeaseDuration: time.Hour})
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != "charge-1" {
		t.Fatalf("claim: %v %+v", err, res)
	}
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetLimit(ctx, engine.Limit{Scope: engine.LimitKind, Name: "charge", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	return path, e
}

// TestJobsListShowsHolds: `sluice jobs list` names, in a HELD BY column,
// the full limit that holds each available job back, with its usage, as
// the JSON's held_by does, on a store and through the API; a row no limit
// holds says "-", and a page with no held row keeps the columns it had.
func TestJobsListShowsHolds(t *testing.T) {
	path, e := heldStore(t)
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{}))
	defer hs.Close()
	t.Setenv("SLUICE_STORE", "")
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_TOKEN", "")

	const held = "limit kind charge 1/1"
	for _, target := range [][]string{{"--store", "sqlite://" + path}, {"--api", hs.URL}} {
		for _, c := range []struct {
			name   string
			args   []string
			header string
			rows   map[string]string // id -> its HELD BY cell; absent when the table has no such column
		}{
			{"every state", nil, "ID STATE QUEUE KIND ATTEMPT SINCE HELD BY LAST ERROR",
				map[string]string{"charge-1": "-", "charge-2": held, "charge-3": held, "send-1": "-"}},
			{"available on billing", []string{"--state", "available", "--queue", "billing"}, "ID STATE QUEUE KIND ATTEMPT SINCE HELD BY LAST ERROR",
				map[string]string{"charge-2": held, "charge-3": held}},
			{"no held row", []string{"--queue", "mail"}, "ID STATE QUEUE KIND ATTEMPT SINCE LAST ERROR",
				map[string]string{"send-1": ""}},
		} {
			t.Run(target[0]+"/"+c.name, func(t *testing.T) {
				code, out, stderr := runCLI(t, "", append(append([]string{"jobs", "list"}, target...), c.args...)...)
				if code != 0 {
					t.Fatalf("exit %d: %s %s", code, out, stderr)
				}
				lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
				if got := strings.Join(strings.Fields(lines[0]), " "); got != c.header {
					t.Fatalf("header %q, want %q:\n%s", got, c.header, out)
				}
				col := strings.Index(lines[0], "HELD BY")
				end := strings.Index(lines[0], "LAST ERROR")
				if len(lines)-1 != len(c.rows) {
					t.Fatalf("%d rows, want %d:\n%s", len(lines)-1, len(c.rows), out)
				}
				for _, l := range lines[1:] {
					id := strings.Fields(l)[0]
					want, ok := c.rows[id]
					if !ok {
						t.Errorf("unexpected row %q", l)
						continue
					}
					if col < 0 {
						continue
					}
					if got := strings.TrimSpace(l[col:min(end, len(l))]); got != want {
						t.Errorf("%s is held by %q, want %q:\n%s", id, got, want, out)
					}
				}
			})
		}
		t.Run(target[0]+"/json", func(t *testing.T) {
			code, out, stderr := runCLI(t, "", append(append([]string{"jobs", "list"}, target...), "-o", "json")...)
			var page engine.JobPage
			if code != 0 || json.Unmarshal([]byte(out), &page) != nil {
				t.Fatalf("exit %d: %s %s", code, out, stderr)
			}
			for _, j := range page.Jobs {
				want := map[string]string{"charge-2": held, "charge-3": held}[j.ID]
				if j.HeldBy != want {
					t.Errorf("%s: held_by %q, want %q", j.ID, j.HeldBy, want)
				}
			}
		})
	}
}
