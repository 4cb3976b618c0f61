package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// pillEngine starts an engine over s whose kind "pill" panics on every
// run (counted in runs), with the crash limit given, and returns it with
// a function that waits for the next death and returns the job as the
// store has it.
func pillEngine(t *testing.T, s backend.Store, crashLimit int, runs *atomic.Int32) (*engine.Engine, func(what string) *engine.Job) {
	t.Helper()
	ctx := context.Background()
	e, err := engine.New(s, engine.Config{
		Queues:          map[string]engine.QueueConfig{"q": {Concurrency: 1}},
		PollInterval:    10 * time.Millisecond,
		CrashLimit:      crashLimit,
		CrashBackoff:    func(int) time.Duration { return time.Millisecond },
		ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(engine.Kind{Name: "pill", Handler: func(context.Context, *engine.Job) error {
		runs.Add(1)
		panic("poison pill")
	}}); err != nil {
		t.Fatal(err)
	}
	died := make(chan engine.DeathEvent, 10)
	e.OnDead(func(_ context.Context, ev engine.DeathEvent) { died <- ev })
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	death := func(what string) *engine.Job {
		t.Helper()
		select {
		case ev := <-died:
			d, err := e.GetJob(ctx, ev.Job.ID, false)
			if err != nil {
				t.Fatal(err)
			}
			return d.Job
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no quarantine", what)
			return nil
		}
	}
	return e, death
}

// TestCrashOnProbationQuarantinesAtOnce: a job released alone, its
// fingerprint staying quarantined, is on probation as a job of a released
// fingerprint is: its next crash quarantines it again at once, not after
// CrashLimit more crashes counted from the release's reset zero.
func TestCrashOnProbationQuarantinesAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var runs atomic.Int32
	e, death := pillEngine(t, sqlitetest.New(t), 3, &runs)
	record := func(fp string) *engine.Fingerprint {
		t.Helper()
		fps, err := e.Quarantine(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fps {
			if f.Fingerprint == fp {
				return f
			}
		}
		t.Fatalf("no record of fingerprint %s", fp)
		return nil
	}
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "P-1", Queue: "q", Kind: "pill", Payload: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	j := death("first quarantine")
	if j.State != engine.StateQuarantined || j.CrashAttempt != 3 {
		t.Fatalf("P-1 at the crash limit: %s crash=%d, want quarantined after 3", j.State, j.CrashAttempt)
	}
	fp := j.Fingerprint

	// Released alone: the fingerprint stays quarantined, and one crash
	// quarantines the job again.
	j, err := e.ReleaseJob(ctx, "P-1")
	if err != nil || j.State != engine.StateAvailable {
		t.Fatalf("ReleaseJob: %v %v", j, err)
	}
	if r := record(fp); r.Status != engine.FingerprintQuarantined {
		t.Fatalf("fingerprint after releasing one job: %s, want quarantined", r.Status)
	}
	j = death("crash after the job's release")
	n := runs.Load()
	if j.State != engine.StateQuarantined || j.CrashAttempt != 1 || n != 4 {
		t.Fatalf("P-1 released alone, after a crash: %s crash=%d, ran %d times, want quarantined at once (crash=1, 4 runs)", j.State, j.CrashAttempt, n)
	}
	if r := record(fp); r.Status != engine.FingerprintQuarantined || r.Crashes != 4 {
		t.Fatalf("fingerprint after the crash on probation: %s, %d crashes, want quarantined, 4", r.Status, r.Crashes)
	}

	// The fingerprint released: on probation, and one crash quarantines
	// it again, as before.
	if _, err := e.ReleaseFingerprint(ctx, fp); err != nil {
		t.Fatal(err)
	}
	j = death("crash after the fingerprint's release")
	n = runs.Load()
	if j.State != engine.StateQuarantined || j.CrashAttempt != 1 || n != 5 {
		t.Fatalf("P-1 after its fingerprint's release, after a crash: %s crash=%d, ran %d times, want quarantined at once (crash=1, 5 runs)", j.State, j.CrashAttempt, n)
	}
	if r := record(fp); r.Status != engine.FingerprintQuarantined {
		t.Fatalf("fingerprint after a crash on probation: %s, want quarantined", r.Status)
	}
}

// blinkingStore is the real SQLite store whose next fails quarantine
// record reads fail as a dropped connection does.
type blinkingStore struct {
	*sqlite.Store
	fails  atomic.Int32
	failed atomic.Int32
}

func (s *blinkingStore) FingerprintGet(ctx context.Context, p *backend.FingerprintGetParams) (*engine.Fingerprint, error) {
	if s.fails.Add(-1) >= 0 {
		s.failed.Add(1)
		return nil, fmt.Errorf("read fingerprint: %w", syscall.ECONNRESET)
	}
	return s.Store.FingerprintGet(ctx, p)
}

// TestProbationReadFailureChargesNoPlainCrash: when the read of the
// quarantine record fails as a released job crashes, the crash is not
// charged as an ordinary one (which would let the pill run, and kill a
// worker, again): the read is retried and the job is quarantined at once.
func TestProbationReadFailureChargesNoPlainCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &blinkingStore{Store: sqlitetest.New(t)}
	var runs atomic.Int32
	e, death := pillEngine(t, s, 2, &runs)
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "P-1", Queue: "q", Kind: "pill", Payload: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	if j := death("first quarantine"); j.State != engine.StateQuarantined || j.CrashAttempt != 2 {
		t.Fatalf("P-1 at the crash limit: %s crash=%d, want quarantined after 2", j.State, j.CrashAttempt)
	}
	s.fails.Store(2)
	if _, err := e.ReleaseJob(ctx, "P-1"); err != nil {
		t.Fatal(err)
	}
	j := death("crash on probation")
	if j.State != engine.StateQuarantined || j.CrashAttempt != 1 || runs.Load() != 3 {
		t.Fatalf("P-1 released, its record unreadable twice as it crashed: %s crash=%d, ran %d times, want quarantined at once (crash=1, 3 runs)",
			j.State, j.CrashAttempt, runs.Load())
	}
	if n := s.failed.Load(); n != 2 {
		t.Fatalf("%d record reads failed, want 2 (the test did not meet the fault)", n)
	}
}
