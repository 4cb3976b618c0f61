package sqlite_test

// Helpers the SQLite-only tests share: jobs, claims, dead jobs, the
// counters against the jobs themselves.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

var ctx = context.Background()

func job(id, queue, kind string) *engine.JobInsertParams {
	return &engine.JobInsertParams{
		ID:            id,
		Queue:         queue,
		Kind:          kind,
		Payload:       json.RawMessage(`{"n":"` + id + `"}`),
		SchemaVersion: 1,
		MaxAttempts:   3,
		Fingerprint:   "fp-" + id,
	}
}

func insert(t testing.TB, s *sqlite.Store, jobs ...*engine.JobInsertParams) []engine.JobInsertResult {
	t.Helper()
	res, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: jobs, RefuseQuarantined: true})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("insert %s: %v", jobs[i].ID, r.Err)
		}
	}
	return res
}

func get(t testing.TB, s *sqlite.Store, id string) *engine.Job {
	t.Helper()
	j, err := s.JobGetByID(ctx, &engine.JobGetByIDParams{ID: id, IncludePayload: true})
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func claim(t testing.TB, s *sqlite.Store, p engine.JobClaimParams) *engine.JobClaimResult {
	t.Helper()
	if p.WorkerID == "" {
		p.WorkerID = "w1"
	}
	if p.LeaseID == "" {
		p.LeaseID = fmt.Sprintf("lease-%d", time.Now().UnixNano())
	}
	if p.LeaseDuration == 0 {
		p.LeaseDuration = time.Minute
	}
	res, err := s.JobClaim(ctx, &p)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return res
}

func ids(js []*engine.Job) []string {
	out := []string{}
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

func ref(j *engine.Job) engine.JobRef {
	return engine.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence}
}

// kill claims the given jobs of queue (all of its available jobs must be
// these) and finishes each in state to with an error message of msg(i).
func kill(t testing.TB, s *sqlite.Store, queue string, n int, to engine.State, msg func(i int) string) []*engine.Job {
	t.Helper()
	res := claim(t, s, engine.JobClaimParams{Queue: queue, Limit: n})
	if len(res.Jobs) != n {
		t.Fatalf("kill: claimed %d jobs of %s, want %d", len(res.Jobs), queue, n)
	}
	out := make([]*engine.Job, n)
	for i, j := range res.Jobs {
		m := msg(i)
		reason := engine.ReasonAttemptsExhausted
		if to == engine.StateUndecodable {
			reason = engine.ReasonUndecodable
		}
		d, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: to, Reason: reason,
			Charge: engine.ChargeAttempt, Finalize: to.Terminal(),
			Error: &engine.ErrorWrite{Entry: engine.AttemptError{Attempt: j.Attempt + 1, Worker: "w1", Message: m},
				Keep: engine.MaxKeptErrors, LastError: m, Pattern: engine.NormalizeError(m)},
			Event:  &engine.EventWrite{Kind: engine.EventArchived, Actor: "w1", From: engine.StateRunning, To: to, Attempt: j.Attempt + 1, Message: m},
			Counts: []engine.CountDelta{{Queue: j.Queue, From: engine.StateRunning, To: to, N: 1}}})
		if err != nil {
			t.Fatalf("kill %s: %v", j.ID, err)
		}
		out[i] = d
	}
	return out
}

// rawDB opens the store's file on its own connection, for checks against
// the jobs themselves.
func rawDB(t testing.TB, s *sqlite.Store) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", s.Path()+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// truth counts the jobs per queue and state with GROUP BY.
func truth(t testing.TB, db *sql.DB) map[string]map[engine.State]int64 {
	t.Helper()
	rows, err := db.Query(`SELECT queue, state, count(*) FROM jobs GROUP BY queue, state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[engine.State]int64{}
	for rows.Next() {
		var q, st string
		var n int64
		if err := rows.Scan(&q, &st, &n); err != nil {
			t.Fatal(err)
		}
		if out[q] == nil {
			out[q] = map[engine.State]int64{}
		}
		out[q][engine.State(st)] = n
	}
	return out
}

func countsEqual(a, b map[string]map[engine.State]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[engine.State]int64) bool { return maps.Equal(x, y) })
}

// checkCounts compares the maintained counters with the jobs.
func checkCounts(t testing.TB, s *sqlite.Store, db *sql.DB, step string) {
	t.Helper()
	got, err := s.JobCountByQueue(ctx, &engine.JobCountByQueueParams{})
	if err != nil {
		t.Fatal(err)
	}
	if want := truth(t, db); !countsEqual(got, want) {
		t.Fatalf("after %s: counters %v, jobs %v", step, got, want)
	}
}

func listIDs(t testing.TB, s *sqlite.Store, f engine.Filter) []string {
	t.Helper()
	js, err := s.JobList(ctx, &engine.JobListParams{Filter: f, Limit: 1000})
	if err != nil {
		t.Fatalf("JobList(%s): %v", f, err)
	}
	out := ids(js)
	slices.Sort(out)
	return out
}

// cancelJob cancels a job as the engine does.
func cancelJob(t testing.TB, s *sqlite.Store, id string) (*engine.Job, error) {
	t.Helper()
	spec, err := engine.SpecFor(engine.ActionCancel)
	if err != nil {
		t.Fatal(err)
	}
	return s.JobAction(ctx, &engine.JobActionParams{ID: id, Spec: spec,
		Event: engine.EventWrite{Kind: spec.Event, Actor: "ops", To: spec.To}})
}

// runOperation runs operation id to its end through the engine's runner,
// in batches of limit, and returns it as it ended.
func runOperation(t testing.TB, s *sqlite.Store, id string, limit int) *engine.Operation {
	t.Helper()
	e, err := engine.New(s, engine.Config{OperationBatch: limit, NoMaintenance: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if did, err := e.RunOperation(ctx); err != nil || !did {
		t.Fatalf("run operation %s: %v %v", id, did, err)
	}
	op, err := s.OperationGet(ctx, &engine.OperationGetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return op
}
