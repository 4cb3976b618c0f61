package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/engine"
)

// TestExportJobsPages holds ExportJobs to every matching job once, across
// page boundaries (MaxListLimit), with or without payloads, and to the
// errors it is handed, on every store (a payload filter is a bounded scan
// on Redis, whose pages may stop early with a cursor to go on from).
func TestExportJobsPages(t *testing.T) {
	for _, sc := range []struct {
		name string
		open func(t *testing.T) backend.Store
	}{
		{"sqlite", func(t *testing.T) backend.Store {
			store, closeStore := exampleStore(context.Background())
			t.Cleanup(closeStore)
			return store
		}},
		{"postgres", func(t *testing.T) backend.Store { return pgtest.New(t) }},
		{"redis", func(t *testing.T) backend.Store { return redistest.New(t) }},
	} {
		t.Run(sc.name, func(t *testing.T) { exportJobsPages(t, sc.open(t)) })
	}
}

func exportJobsPages(t *testing.T, store backend.Store) {
	ctx := context.Background()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	n := engine.MaxListLimit*2 + 7
	ps := make([]engine.EnqueueParams, n)
	for i := range ps {
		q := "billing"
		if i%10 == 0 {
			q = "mail"
		}
		ps[i] = engine.EnqueueParams{ID: fmt.Sprintf("j%04d", i), Queue: q, Kind: "k", Args: map[string]int{"i": i}}
	}
	if _, err := e.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	for _, tc := range []struct {
		name    string
		q       string
		payload bool
		emitErr error
		wrapped bool // a Control that is not the *Engine: payloads by GetJob
		want    int
		wantErr error
	}{
		{name: "all", want: n},
		{name: "one queue", q: "queue:mail", want: (n + 9) / 10},
		{name: "with payload", q: "queue:billing", payload: true, want: n - (n+9)/10},
		{name: "with payload through GetJob", q: "queue:mail", payload: true, wrapped: true, want: (n + 9) / 10},
		{name: "no match", q: "queue:none", want: 0},
		{name: "payload filter", q: "payload.i:7", payload: true, want: 1},
		{name: "emit stops", emitErr: stop, want: 1, wantErr: stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := engine.ParseQuery(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var ctl engine.Control = e
			if tc.wrapped {
				ctl = struct{ engine.Control }{e}
			}
			seen := map[string]bool{}
			err = engine.ExportJobs(ctx, ctl, engine.ExportJobsParams{Filter: f, WithPayload: tc.payload}, func(j *engine.Job) error {
				if seen[j.ID] {
					t.Errorf("job %s exported twice", j.ID)
				}
				seen[j.ID] = true
				if got := len(j.Payload) > 0; got != tc.payload {
					t.Errorf("job %s: payload %q, want one: %v", j.ID, j.Payload, tc.payload)
				}
				return tc.emitErr
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(seen) != tc.want {
				t.Errorf("exported %d jobs, want %d", len(seen), tc.want)
			}
		})
	}
}
