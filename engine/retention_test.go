package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

func TestParseRetention(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	tests := []struct {
		specs    []string
		defaults map[engine.State]time.Duration
		queue    map[string]map[engine.State]time.Duration
		wantErr  bool
	}{
		{specs: []string{"archived=14d", "completed=36h"}, defaults: map[engine.State]time.Duration{engine.StateArchived: 14 * day, engine.StateCompleted: 36 * time.Hour}},
		{specs: []string{"billing/archived=forever", "billing/cancelled=0s"},
			queue: map[string]map[engine.State]time.Duration{"billing": {engine.StateArchived: engine.Forever, engine.StateCancelled: 0}}},
		{specs: []string{"running=1h"}, wantErr: true},
		{specs: []string{"archived"}, wantErr: true},
		{specs: []string{"archived=-1h"}, wantErr: true},
		{specs: []string{"archived=1.5d"}, wantErr: true},
		{specs: []string{"bad queue/archived=1h"}, wantErr: true},
	}
	for _, tt := range tests {
		d, q, err := engine.ParseRetention(tt.specs)
		if tt.wantErr {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("ParseRetention(%q) = %v, want ErrInvalid", tt.specs, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRetention(%q): %v", tt.specs, err)
			continue
		}
		for st, want := range tt.defaults {
			if d[st] != want {
				t.Errorf("ParseRetention(%q) default %s = %v, want %v", tt.specs, st, d[st], want)
			}
		}
		for name, m := range tt.queue {
			for st, want := range m {
				if got, ok := q[name][st]; !ok || got != want {
					t.Errorf("ParseRetention(%q) %s/%s = %v, want %v", tt.specs, name, st, got, want)
				}
			}
		}
	}
	for d, want := range map[time.Duration]string{14 * day: "14d", 36 * time.Hour: "36h0m0s", engine.Forever: "forever", 0: "0s"} {
		if got := engine.FormatRetention(d); got != want {
			t.Errorf("FormatRetention(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestRetentionVisible: a terminal job's detail says when retention
// deletes it, Queues says each queue's retention, and a per-queue
// retention given for a queue this engine does not work is swept.
func TestRetentionVisible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	killJobs(t, store, "billing", []string{"b1"})
	killJobs(t, store, "late", []string{"l1"})
	cfg := engine.Config{
		NoMaintenance:  true,
		Retention:      map[engine.State]time.Duration{engine.StateArchived: 14 * 24 * time.Hour, engine.StateCompleted: time.Hour},
		QueueRetention: map[string]map[engine.State]time.Duration{"billing": {engine.StateArchived: 2 * time.Hour, engine.StateCompleted: engine.Forever}},
	}
	e, err := engine.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for id, keep := range map[string]time.Duration{"b1": 2 * time.Hour, "l1": 14 * 24 * time.Hour} {
		d, err := e.GetJob(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if d.DeleteAt == nil || !d.DeleteAt.Equal(d.Job.FinalizedAt.Add(keep)) {
			t.Errorf("%s: delete at %v, want %v after its death at %v", id, d.DeleteAt, keep, d.Job.FinalizedAt)
		}
	}
	qs, err := e.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]engine.QueueInfo{}
	for _, q := range qs {
		byName[q.Name] = q
	}
	if r := byName["billing"].Retention; r[engine.StateArchived] != 2*time.Hour || len(r) != 1 {
		t.Errorf("billing retention %v, want archived 2h and completed kept forever (absent)", r)
	}
	if r := byName["late"].Retention; r[engine.StateArchived] != 14*24*time.Hour || r[engine.StateCompleted] != time.Hour {
		t.Errorf("late retention %v, want the defaults", r)
	}

	// A sweeping engine that works no queue at all deletes billing's dead
	// at once and keeps late's.
	cfg.NoMaintenance, cfg.MaintenanceInterval = false, 10*time.Millisecond
	cfg.QueueRetention = map[string]map[engine.State]time.Duration{"billing": {engine.StateArchived: 0}}
	sweeper, err := engine.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sweeper.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer sweeper.Stop(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.GetJob(ctx, "b1", false)
		if errors.Is(err, engine.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b1 was not swept: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := e.GetJob(ctx, "l1", false); err != nil {
		t.Fatalf("l1, kept 14 days, is gone: %v", err)
	}
}
