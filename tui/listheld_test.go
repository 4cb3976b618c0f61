package tui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// heldFixture is three invoice jobs of which one runs and two wait under
// a kind limit of 1, and a receipt job no limit holds.
func heldFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{MaintenanceInterval: 20 * time.Millisecond, WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, eng: eng}
	for _, j := range []struct{ id, queue, kind string }{
		{"lim-0001", "billing", "invoice.generate"}, {"lim-0002", "billing", "invoice.generate"},
		{"lim-0003", "billing", "invoice.generate"}, {"rcp-0001", "email", "receipt.send"},
	} {
		if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: j.id, Queue: j.queue, Kind: j.kind,
			Payload: json.RawMessage(`{"invoice":9}`)}); err != nil {
			t.Fatal(err)
		}
	}
	f.claim(t, ctx, "billing", "lim-0001")
	if err := eng.SetLimit(ctx, engine.Limit{Scope: engine.LimitKind, Name: "invoice.generate", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestListHeldByLimit: on the available tab, a job a full limit holds
// back says so in its row, with the limit's usage, where a waiting job
// says what it waits for; a job no limit holds says nothing. Raised, the
// limit holds none of them, and the rows say so at the next load though
// no job was written.
func TestListHeldByLimit(t *testing.T) {
	f := heldFixture(t)
	o := testOptions()
	o.State = engine.StateAvailable
	s := start(t, f.eng, o)
	screen := s.waitFor("lim-0002", "lim-0003", "rcp-0001", "⏸ kind limit 1/1")
	s.golden(screen)
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, "rcp-0001") && strings.Contains(l, "⏸") {
			t.Fatalf("a job no limit holds says it is held: %q", l)
		}
	}
	if n := strings.Count(screen, "⏸ kind limit 1/1"); n != 2 {
		t.Fatalf("%d rows say they are held, want lim-0002 and lim-0003:\n%s", n, screen)
	}

	if err := f.eng.SetLimit(context.Background(), engine.Limit{Scope: engine.LimitKind, Name: "invoice.generate", Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	s.keys("<ctrl+r>")
	s.waitGone("⏸ kind limit")
}

// TestListHeldFitsAt80: at 80 columns the hold's usage is still in the
// row.
func TestListHeldFitsAt80(t *testing.T) {
	f := heldFixture(t)
	m := f.stillConsole(t, 80, 24, func(o *Options) { o.State = engine.StateAvailable })
	runCmd(m, m.loadCounts())
	runCmd(m, m.loadList(listReplace, "", 0))
	screen := plainScreen(m)
	if !strings.Contains(screen, "lim-0002") {
		t.Fatalf("no lim-0002 on the available tab:\n%s", screen)
	}
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, "lim-0002") && !strings.HasSuffix(strings.TrimRight(l, " "), "⏸ kind limit 1/1") {
			t.Fatalf("at 80 columns lim-0002's row does not end with its hold:\n%s", screen)
		}
	}
}
