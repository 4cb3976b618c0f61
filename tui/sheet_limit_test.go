package tui

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestSheetHeldByLimit: an available job that a full limit across
// processes holds back says so on its sheet, with the limit's usage.
func TestSheetHeldByLimit(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{MaintenanceInterval: 20 * time.Millisecond, WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, eng: eng}
	for _, id := range []string{"lim-0001", "lim-0002"} {
		if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: id, Queue: "billing", Kind: "invoice.generate",
			Payload: json.RawMessage(`{"invoice":9}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.SetLimit(ctx, engine.Limit{Scope: engine.LimitKind, Name: "invoice.generate", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	f.claim(t, ctx, "billing", "lim-0001")

	o := testOptions()
	o.State = engine.StateAvailable
	s := start(t, eng, o)
	s.waitFor("lim-0002")
	s.keys("<enter>")
	s.waitFor("job lim-0002", "held by      limit kind invoice.generate 1/1")
}

// TestLimitCommand: :limit asks with the old value and the new, sets the
// limit in the store on yes, and the queues screen shows the queue's
// limit with its running jobs.
func TestLimitCommand(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{MaintenanceInterval: 20 * time.Millisecond, WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, eng: eng}
	if _, err := eng.Enqueue(ctx, engine.EnqueueParams{ID: "lim-0001", Queue: "billing", Kind: "invoice.generate",
		Payload: json.RawMessage(`{"invoice":9}`)}); err != nil {
		t.Fatal(err)
	}
	f.claim(t, ctx, "billing", "lim-0001")
	if err := eng.SetLimit(ctx, engine.Limit{Scope: engine.LimitQueue, Name: "billing", Concurrency: 5}); err != nil {
		t.Fatal(err)
	}

	s := start(t, eng, testOptions())
	s.keys(":")
	s.typeText("queues")
	s.keys("<enter>")
	s.waitFor("retention of billing", "limit 1/5 running")
	s.keys(":")
	s.typeText("limit queue billing 2")
	s.keys("<enter>")
	s.waitFor("Limit queue billing: 5 → 2?")
	s.keys("y")
	s.waitFor("limit queue billing: 5 → 2", "limit 1/2 running")
	ls, err := eng.ListLimits(ctx)
	if err != nil || len(ls) != 1 || ls[0].Concurrency != 2 || ls[0].UpdatedBy == "" {
		t.Fatalf("limits after the console set one: %+v %v", ls, err)
	}
	s.keys(":")
	s.typeText("limit tenant x 1")
	s.keys("<enter>")
	s.waitFor("scope \"tenant\": want kind or queue")
}

// TestLimitCommandKeepsRateAndPartition: :limit changes a limit's count
// only. A set writes the whole limit, so the console carries over the
// rate and the partition it has, and its confirmation says the rate stays;
// before, a rate of 10 a second was dropped by a change the screen stated
// as "5 → 2".
func TestLimitCommandKeepsRateAndPartition(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{WorkerID: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []engine.Limit{
		{Scope: engine.LimitKind, Name: "invoice.generate", Concurrency: 5, Rate: 10},
		{Scope: engine.LimitKind, Name: "email.send", Concurrency: 3, Key: "customer"},
	} {
		if err := eng.SetLimit(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t, eng, testOptions())
	s.keys(":")
	s.typeText("limit kind invoice.generate 2")
	s.keys("<enter>")
	s.waitFor("Limit kind invoice.generate: 5 → 2?", "its rate stays: at most 10 starts per 1s")
	s.keys("y")
	s.waitFor("limit kind invoice.generate: 5 → 2")
	s.keys(":")
	s.typeText("limit kind email.send 1")
	s.keys("<enter>")
	s.waitFor("Limit kind email.send per customer: 3 → 1?")
	s.keys("y")
	s.waitFor("limit kind email.send per customer: 3 → 1")
	ls, err := eng.ListLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.Limit{}
	for _, l := range ls {
		got[l.Name] = l
	}
	if l := got["invoice.generate"]; l.Concurrency != 2 || l.Rate != 10 {
		t.Errorf("invoice.generate after :limit: %+v, want concurrency 2 and its rate 10 kept", l)
	}
	if l := got["email.send"]; l.Concurrency != 1 || l.Key != "customer" {
		t.Errorf("email.send after :limit: %+v, want concurrency 1 per customer", l)
	}
}
