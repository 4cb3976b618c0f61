package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// The server's tests run against a real engine on a new SQLite file that
// holds what an operator finds after a bad night in billing:
//
//	JOB_1 … JOB_5  billing  archived     "card declined"
//	EMAIL_1        email    archived     "card declined"
//	PILL_1         billing  archived     "card declined", the pill's payload
//	HELD_1         billing  quarantined  crashed on the pill's payload,
//	                                     which quarantined its fingerprint
//	WAIT_1         billing  scheduled    due in an hour
//
// All are kind charge with metadata {"tenant":"acme"}. No worker runs and
// no maintenance: nothing changes but what a test does.

const (
	// okPayload is every job's payload but the pill's.
	okPayload = `{"customer":42,"secret":"s3cr3t"}`
	// pillPayload is the payload whose crash quarantined its fingerprint.
	pillPayload = `{"customer":13,"secret":"s3cr3t"}`
	// pillFingerprint is engine.FingerprintOf("charge", pillPayload);
	// newFixture checks it.
	pillFingerprint = "8aad22c2ac4445cfc36d3559b19c1c92ba94fe91bbd94b2c6fa84c13f84fd9c6"
	// billingGroup is the id of the error group of the billing queue's
	// dead charges ("card declined"); newFixture checks it.
	billingGroup = "4f4ff10f585db1de"
	// deadVersion is the version of each job that died: enqueued (1),
	// claimed (2), finished (3). Payload edits send it as If-Match;
	// newFixture checks it.
	deadVersion = 3
)

// fixture is the engine a test's server serves, and the store under it.
type fixture struct {
	eng   *engine.Engine
	store *sqlite.Store
}

// newFixture builds the jobs above in a new SQLite file of t's.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	fx := openFixture(t, sqlitetest.Path(t))
	fx.seed(t)
	return fx
}

// fixtureFile is the fixture's database file, for a test whose many
// subtests each change a fixture of their own: built once, and each
// opened fixture is a copy of it, which costs a fraction of a build.
type fixtureFile []byte

// newFixtureFile builds the fixture once and keeps its file.
func newFixtureFile(t testing.TB) fixtureFile {
	t.Helper()
	path := sqlitetest.Path(t)
	fx := openFixture(t, path)
	fx.seed(t)
	if err := fx.store.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := fx.store.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// open returns a fixture on a copy of the file in t's temporary
// directory.
func (f fixtureFile) open(t testing.TB) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.db")
	if err := os.WriteFile(path, f, 0o600); err != nil {
		t.Fatal(err)
	}
	return openFixture(t, path)
}

// openFixture opens the store at path, closed when t ends, and an engine
// over it.
func openFixture(t testing.TB, path string) *fixture {
	t.Helper()
	store, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// One crash quarantines, so the pill's one run does.
	e, err := engine.New(store, engine.Config{NoMaintenance: true, CrashLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{eng: e, store: store}
}

// seed writes the jobs above: enqueued in one call, claimed, and each
// run ended as a worker's handler ends it (an error, a crash), written as
// the engine writes a finish, with the state machine's row for it.
func (fx *fixture) seed(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	runs := []struct {
		id, queue, payload string
		trigger            backend.Trigger
		message            string
	}{
		{"JOB_1", "billing", okPayload, backend.TriggerError, "card declined"},
		{"JOB_2", "billing", okPayload, backend.TriggerError, "card declined"},
		{"JOB_3", "billing", okPayload, backend.TriggerError, "card declined"},
		{"JOB_4", "billing", okPayload, backend.TriggerError, "card declined"},
		{"JOB_5", "billing", okPayload, backend.TriggerError, "card declined"},
		{"EMAIL_1", "email", okPayload, backend.TriggerError, "card declined"},
		// Dead before HELD_1's crash quarantines its fingerprint, so it
		// stays dead.
		{"PILL_1", "billing", pillPayload, backend.TriggerError, "card declined"},
		{"HELD_1", "billing", pillPayload, backend.TriggerCrash, "out of memory"},
	}
	meta := json.RawMessage(`{"tenant":"acme"}`)
	ps := []engine.EnqueueParams{{ID: "WAIT_1", Queue: "billing", Kind: "charge", Payload: json.RawMessage(okPayload), Metadata: meta, Delay: time.Hour}}
	for _, r := range runs {
		ps = append(ps, engine.EnqueueParams{ID: r.id, Queue: r.queue, Kind: "charge", Payload: json.RawMessage(r.payload), Metadata: meta, MaxAttempts: 1})
	}
	res, err := fx.eng.EnqueueMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("fixture: %v", r.Err)
		}
	}
	running := map[string]*engine.Job{}
	for _, q := range []string{"billing", "email"} {
		res, err := fx.store.JobClaim(ctx, &backend.JobClaimParams{Queue: q, WorkerID: "worker-1", LeaseID: "lease-" + q, Limit: len(runs),
			Kinds: map[string]int{"charge": 1}, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatalf("fixture: claim %s: %v", q, err)
		}
		for _, j := range res.Jobs {
			running[j.ID] = j
		}
	}
	for _, r := range runs {
		j := running[r.id]
		if j == nil {
			t.Fatalf("fixture: %s was not claimed", r.id)
		}
		row, err := backend.Next(j, r.trigger, fx.eng.Config().CrashLimit)
		if err != nil {
			t.Fatal(err)
		}
		event := engine.EventArchived
		if row.Quarantine {
			event = engine.EventQuarantined
		}
		if _, err := fx.store.JobFinish(ctx, backendtest.Outcome{
			JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence},
			To:     row.To, Reason: row.Reason, Charge: row.Charge, Quarantine: row.Quarantine,
			Event: event, Actor: "worker-1", Message: r.message,
			Error:        &engine.AttemptError{Crash: r.trigger == backend.TriggerCrash, Message: r.message},
			ErrorPattern: engine.NormalizeError(r.message),
		}.Plan(j)); err != nil {
			t.Fatalf("fixture: finish %s: %v", r.id, err)
		}
	}

	d, err := fx.eng.GetJob(ctx, "HELD_1", false)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.State != engine.StateQuarantined || d.Job.Fingerprint != pillFingerprint {
		t.Fatalf("fixture: HELD_1 is %s with fingerprint %s, want quarantined with %s", d.Job.State, d.Job.Fingerprint, pillFingerprint)
	}
	if d, err = fx.eng.GetJob(ctx, "JOB_1", false); err != nil || d.Job.Version != deadVersion {
		t.Fatalf("fixture: JOB_1 %+v %v, want version %d (deadVersion)", d, err, deadVersion)
	}
	if id := engine.ErrorGroupID("billing", "charge", "card declined"); id != billingGroup {
		t.Fatalf("fixture: the billing group's id is %s, want %s (billingGroup)", id, billingGroup)
	}
	// A schedule, as a process declaring it writes it.
	ss, err := backend.ScheduleStoreOf(fx.store)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.ScheduleUpsert(ctx, &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{{Name: "nightly", Spec: "30 2 * * *", Zone: "Europe/Berlin"}}}); err != nil {
		t.Fatal(err)
	}
}

// setup returns a new fixture and a server over its engine.
func setup(t testing.TB, opts ServerOptions) (*fixture, *Server) {
	t.Helper()
	fx := newFixture(t)
	return fx, NewServer(fx.eng, opts)
}

// setup returns a fixture on a copy of the file and a server over it.
func (f fixtureFile) setup(t testing.TB, opts ServerOptions) (*fixture, *Server) {
	t.Helper()
	fx := f.open(t)
	return fx, NewServer(fx.eng, opts)
}

// state is job id's state; "" when it is gone.
func (fx *fixture) state(t testing.TB, id string) engine.State {
	t.Helper()
	d, err := fx.eng.GetJob(context.Background(), id, false)
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return ""
		}
		t.Fatal(err)
	}
	return d.Job.State
}

// actors lists who wrote each of job id's events of kind, oldest first.
func (fx *fixture) actors(t testing.TB, id string, kind engine.EventKind) []string {
	t.Helper()
	ev, err := fx.store.JobEventList(context.Background(), &backend.JobEventListParams{JobID: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ev {
		if e.Kind == kind {
			out = append(out, e.Actor)
		}
	}
	return out
}

// snapshot is everything a request can change, as the store has it:
// every job's state, version and buffered signals, the quarantine
// records, the queues' pause and the operations. Two snapshots are equal when nothing changed.
func (fx *fixture) snapshot(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	page, err := fx.eng.ListJobs(ctx, engine.ListJobsParams{Limit: engine.MaxListLimit})
	if err != nil || page.Next != "" {
		t.Fatalf("snapshot: jobs %v (more: %q)", err, page.Next)
	}
	var rows []string
	for _, j := range page.Jobs {
		sigs, err := fx.eng.Signals(ctx, j.ID, "")
		if err != nil {
			t.Fatalf("snapshot: signals of %s: %v", j.ID, err)
		}
		rows = append(rows, fmt.Sprintf("job %s=%s/%d signals %d", j.ID, j.State, j.Version, len(sigs)))
	}
	fps, err := fx.eng.Quarantine(ctx)
	if err != nil {
		t.Fatalf("snapshot: quarantine: %v", err)
	}
	for _, fp := range fps {
		rows = append(rows, fmt.Sprintf("fingerprint %s=%s held %d", fp.Fingerprint, fp.Status, fp.Held))
	}
	qs, err := fx.eng.Queues(ctx)
	if err != nil {
		t.Fatalf("snapshot: queues: %v", err)
	}
	for _, q := range qs {
		rows = append(rows, fmt.Sprintf("queue %s paused=%v", q.Name, q.Paused))
	}
	ls, err := fx.eng.ListLimits(ctx)
	if err != nil {
		t.Fatalf("snapshot: limits: %v", err)
	}
	for _, l := range ls {
		rows = append(rows, fmt.Sprintf("limit %s=%d", l, l.Concurrency))
	}
	ops, err := fx.eng.Operations(ctx, 100, "")
	if err != nil {
		t.Fatalf("snapshot: operations: %v", err)
	}
	for _, op := range ops.Operations {
		rows = append(rows, fmt.Sprintf("operation %s=%s", op.ID, op.Status))
	}
	sch, err := fx.eng.Schedules(ctx, 200, "")
	if err != nil {
		t.Fatalf("snapshot: schedules: %v", err)
	}
	for _, s := range sch.Schedules {
		rows = append(rows, fmt.Sprintf("schedule %s paused=%v run-now=%v", s.Name, s.Paused, s.RunNowPending))
	}
	gs, err := fx.eng.ListErrorGroups(ctx, engine.ListErrorGroupsParams{Ignored: true})
	if err != nil {
		t.Fatalf("snapshot: error groups: %v", err)
	}
	for _, g := range gs {
		rows = append(rows, fmt.Sprintf("error group %s=%s %q", g.ID, g.Status, g.Note))
	}
	slices.Sort(rows)
	return strings.Join(rows, "\n")
}
