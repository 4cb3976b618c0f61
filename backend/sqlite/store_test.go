package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
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
	res, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: jobs})
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

func TestInsert(t *testing.T) {
	s := sqlitetest.New(t)
	a := job("a", "q", "k")
	a.Tags = []string{"x", `y"z`}
	a.Metadata = json.RawMessage(`{"m":1}`)
	dl := time.Now().Add(time.Hour)
	a.Deadline = &dl
	a.Timeout = 5 * time.Second
	b := job("b", "q", "k")
	b.Delay = time.Hour
	res := insert(t, s, a, b)
	if res[0].Existing || res[0].Job.State != engine.StateAvailable || res[0].Job.Payload != nil {
		t.Fatalf("a: %+v", res[0])
	}
	if res[1].Job.State != engine.StateScheduled {
		t.Fatalf("b: state %s", res[1].Job.State)
	}
	got := get(t, s, "a")
	want := *res[0].Job
	want.Payload = a.Payload
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("stored job differs from the returned one:\n got %+v\nwant %+v", got, &want)
	}
	if got.Version != 1 || got.Fence != 0 || got.Attempt != 0 || got.Errors != nil || got.Lease != nil {
		t.Fatalf("new job: %+v", got)
	}
	if !got.Deadline.Equal(dl) || got.Deadline.Location() != time.UTC {
		t.Fatalf("deadline %v, want %v UTC", got.Deadline, dl)
	}

	// Same id and content: the existing job.
	again := job("a", "q", "k")
	res, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: []*engine.JobInsertParams{again, job("c", "q", "k")}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !res[0].Existing || res[0].Job.ID != "a" || res[0].Job.Payload != nil {
		t.Fatalf("re-insert: %+v", res[0])
	}
	if res[1].Err != nil || res[1].Existing {
		t.Fatalf("c: %+v", res[1])
	}

	// Same id, other content: conflict, and the others of the batch go in.
	other := job("a", "q", "k")
	other.Fingerprint = "other"
	otherQueue := job("b", "q2", "k")
	res, err = s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: []*engine.JobInsertParams{other, otherQueue, job("d", "q", "k")}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !errors.Is(res[i].Err, engine.ErrConflict) {
			t.Fatalf("conflict %d: %+v", i, res[i])
		}
	}
	if res[2].Err != nil {
		t.Fatal(res[2].Err)
	}
	if _, err := s.JobGetByID(ctx, &engine.JobGetByIDParams{ID: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
}

func TestInsertRefusesQuarantined(t *testing.T) {
	s := sqlitetest.New(t)
	a := job("a", "q", "k")
	a.Fingerprint = "poison"
	insert(t, s, a)
	j := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1}).Jobs[0]
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: engine.StateQuarantined,
		Reason: engine.ReasonQuarantined, Charge: engine.ChargeCrash, Quarantine: true,
		Error: &engine.AttemptError{Crash: true, Message: "boom"}, Event: engine.EventQuarantined, Actor: "w1"}); err != nil {
		t.Fatal(err)
	}
	b := job("b", "q", "k")
	b.Fingerprint = "poison"
	res, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: []*engine.JobInsertParams{b, job("c", "q", "k")}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, engine.ErrQuarantined) {
		t.Fatalf("quarantined insert: %+v", res[0])
	}
	if res[1].Err != nil {
		t.Fatal(res[1].Err)
	}
	if _, err := s.JobGetByID(ctx, &engine.JobGetByIDParams{ID: "b"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("refused job stored: %v", err)
	}
	// Probation does not refuse.
	if _, err := s.FingerprintRelease(ctx, &engine.FingerprintReleaseParams{Fingerprint: "poison", Actor: "op"}); err != nil {
		t.Fatal(err)
	}
	insert(t, s, b)
}

func TestClaimOrderAndFilters(t *testing.T) {
	s := sqlitetest.New(t)
	past := time.Now().Add(-time.Minute)
	mk := func(id string, prio int, kind string, ver int) *engine.JobInsertParams {
		j := job(id, "q", kind)
		j.Priority = prio
		j.SchemaVersion = ver
		return j
	}
	early := mk("e", 5, "k", 1)
	early.ScheduledAt = &past
	insert(t, s,
		mk("a", 5, "k", 1), mk("b", 1, "k", 1), early, mk("c", 5, "k", 2),
		mk("d", 0, "other", 1), job("x", "q2", "k"),
	)
	// Kind and version filter: k up to version 1.
	res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 10, Kinds: map[string]int{"k": 1}, LeaseID: "L1"})
	if got, want := ids(res.Jobs), []string{"b", "e", "a"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	for _, j := range res.Jobs {
		if j.State != engine.StateRunning || j.Fence != 1 || j.Lease == nil || j.Lease.ID != "L1" ||
			j.Lease.WorkerID != "w1" || j.Lease.Fence != 1 || j.AttemptedBy != "w1" || j.Payload == nil ||
			!j.Lease.ExpiresAt.Equal(res.Now.Add(time.Minute)) || !j.AttemptedAt.Equal(res.Now) || j.Version != 2 {
			t.Fatalf("claimed job: %+v lease %+v", j, j.Lease)
		}
		if !reflect.DeepEqual(get(t, s, j.ID), j) {
			t.Fatalf("claim returned %+v, stored %+v", j, get(t, s, j.ID))
		}
	}
	// A newer worker takes version 2; any kind with nil Kinds.
	res = claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 10, Kinds: map[string]int{"k": 2, "nothing": 1}})
	if got := ids(res.Jobs); !reflect.DeepEqual(got, []string{"c"}) {
		t.Fatalf("claimed %v", got)
	}
	res = claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 10})
	if got := ids(res.Jobs); !reflect.DeepEqual(got, []string{"d"}) {
		t.Fatalf("claimed %v", got)
	}
	if res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 10}); len(res.Jobs) != 0 {
		t.Fatalf("claimed %v from an empty queue", ids(res.Jobs))
	}
}

// makeSuspect runs id and crashes it back to available.
func makeSuspect(t *testing.T, s *sqlite.Store, id string) {
	t.Helper()
	j := get(t, s, id)
	res := claim(t, s, engine.JobClaimParams{Queue: j.Queue, Limit: 100})
	for _, c := range res.Jobs {
		to := engine.StateAvailable
		charge := engine.ChargeNone
		if c.ID == id {
			charge = engine.ChargeCrash
		}
		if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(c), To: to, Charge: charge}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClaimSuspects(t *testing.T) {
	s := sqlitetest.New(t)
	insert(t, s, job("s1", "q", "k"), job("s2", "q", "k"))
	makeSuspect(t, s, "s1")
	makeSuspect(t, s, "s2")
	insert(t, s, job("a", "q", "k"), job("b", "q", "k"))

	// Non-suspects fill the batch: no suspect taken.
	res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 2, Suspects: 1})
	if got := ids(res.Jobs); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("claimed %v", got)
	}
	// Room left: at most Suspects suspects.
	res = claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 5, Suspects: 1})
	if len(res.Jobs) != 1 || res.Jobs[0].CrashAttempt != 1 {
		t.Fatalf("claimed %v", ids(res.Jobs))
	}
	// Suspects 0: none.
	if res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 5}); len(res.Jobs) != 0 {
		t.Fatalf("claimed suspects %v with Suspects 0", ids(res.Jobs))
	}
	res = claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 5, Suspects: 1})
	if len(res.Jobs) != 1 {
		t.Fatalf("claimed %v", ids(res.Jobs))
	}
}

func TestClaimArchivesPastDeadline(t *testing.T) {
	s := sqlitetest.New(t)
	past := time.Now().Add(-time.Second)
	late := job("late", "q", "k")
	late.Deadline = &past
	lateOther := job("late-other", "q", "other")
	lateOther.Deadline = &past
	future := time.Now().Add(time.Hour)
	ok := job("ok", "q", "k")
	ok.Deadline = &future
	insert(t, s, late, lateOther, ok)

	res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 10, Kinds: map[string]int{"k": 1}})
	if got := ids(res.Jobs); !reflect.DeepEqual(got, []string{"ok"}) {
		t.Fatalf("claimed %v", got)
	}
	if got := ids(res.Dead); !reflect.DeepEqual(got, []string{"late"}) {
		t.Fatalf("dead %v", got)
	}
	d := get(t, s, "late")
	if d.State != engine.StateArchived || d.TerminalReason != engine.ReasonDeadlineExceeded ||
		d.FinalizedAt == nil || !d.FinalizedAt.Equal(res.Now) || d.Fence != 0 || d.AttemptedAt != nil {
		t.Fatalf("archived job: %+v", d)
	}
	ev, err := s.JobEventList(ctx, &engine.JobEventListParams{JobID: "late"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || ev[0].Kind != engine.EventArchived || ev[0].Message != "deadline passed before the job ran" ||
		ev[0].From != engine.StateAvailable || ev[0].To != engine.StateArchived {
		t.Fatalf("events %+v", ev)
	}
	// The other kind is left for its own worker.
	if j := get(t, s, "late-other"); j.State != engine.StateAvailable {
		t.Fatalf("late-other: %s", j.State)
	}
}

func TestCompleteFencing(t *testing.T) {
	s := sqlitetest.New(t)
	insert(t, s, job("a", "q", "k"), job("b", "q", "k"), job("c", "q", "k"))
	res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 3})
	a, b, c := res.Jobs[0], res.Jobs[1], res.Jobs[2]

	// a's lease is lost and a is claimed again: the first holder is stale.
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(a), To: engine.StateAvailable, Event: engine.EventLeaseLost}); err != nil {
		t.Fatal(err)
	}
	a2 := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1, LeaseID: "second"}).Jobs[0]
	if a2.ID != "a" || a2.Fence != 2 {
		t.Fatalf("reclaim: %+v", a2)
	}
	before := get(t, s, "a")

	out, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: []engine.JobCompleteItem{
		{JobRef: ref(a)}, // stale fence and lease
		{JobRef: engine.JobRef{ID: "a", LeaseID: a2.Lease.ID, Fence: 1}}, // right lease, wrong fence
		{JobRef: ref(b)},
		{JobRef: ref(c), Delete: true},
		{JobRef: engine.JobRef{ID: "missing", LeaseID: "x", Fence: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 4} {
		if !errors.Is(out[i], engine.ErrLeaseLost) {
			t.Fatalf("item %d: %v", i, out[i])
		}
	}
	if out[2] != nil || out[3] != nil {
		t.Fatalf("results %v", out)
	}
	if after := get(t, s, "a"); !reflect.DeepEqual(before, after) {
		t.Fatalf("a stale ack changed the row:\nbefore %+v\n after %+v", before, after)
	}
	gb := get(t, s, "b")
	if gb.State != engine.StateCompleted || gb.Lease != nil || gb.FinalizedAt == nil || gb.AttemptedBy != "w1" ||
		gb.Version != b.Version+1 || !gb.StateChangedAt.Equal(*gb.FinalizedAt) {
		t.Fatalf("completed: %+v", gb)
	}
	if _, err := s.JobGetByID(ctx, &engine.JobGetByIDParams{ID: "c"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}

	// A second acknowledgement of b is refused; a duplicate in one batch
	// succeeds once.
	out, err = s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: []engine.JobCompleteItem{
		{JobRef: ref(b)}, {JobRef: ref(a2)}, {JobRef: ref(a2)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(out[0], engine.ErrLeaseLost) || out[1] != nil || !errors.Is(out[2], engine.ErrLeaseLost) {
		t.Fatalf("results %v", out)
	}
}

func TestFinishRetry(t *testing.T) {
	s := sqlitetest.New(t)
	insert(t, s, job("a", "q", "k"))
	j := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1}).Jobs[0]

	// Wrong fence: nothing changes.
	before := get(t, s, "a")
	stale := ref(j)
	stale.Fence++
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: stale, To: engine.StateRetryable, Charge: engine.ChargeAttempt}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("stale finish: %v", err)
	}
	if after := get(t, s, "a"); !reflect.DeepEqual(before, after) {
		t.Fatal("stale finish changed the row")
	}

	got, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: engine.StateRetryable,
		Charge: engine.ChargeAttempt, Delay: time.Hour, Error: &engine.AttemptError{Message: "nope", Trace: "t"},
		Event: engine.EventFailed, Actor: "w1", Message: "failed"})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != engine.StateRetryable || got.Attempt != 1 || got.Lease != nil || got.Payload == nil ||
		len(got.Errors) != 1 || got.Errors[0].Attempt != 1 || got.Errors[0].Worker != "w1" ||
		!got.Errors[0].At.Equal(got.StateChangedAt) || !got.ScheduledAt.Equal(got.StateChangedAt.Add(time.Hour)) ||
		got.FinalizedAt != nil {
		t.Fatalf("retryable: %+v", got)
	}
	if !reflect.DeepEqual(got, get(t, s, "a")) {
		t.Fatal("finish returned something other than the row")
	}
	ev, err := s.JobEventList(ctx, &engine.JobEventListParams{JobID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || ev[0].Kind != engine.EventFailed || ev[0].From != engine.StateRunning ||
		ev[0].To != engine.StateRetryable || ev[0].Attempt != 1 || ev[0].Actor != "w1" || ev[0].Message != "failed" {
		t.Fatalf("events %+v", ev)
	}
	// Finishing again is a lost lease.
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: engine.StateArchived}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("second finish: %v", err)
	}
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: engine.StateRunning}); err == nil {
		t.Fatal("finish to running accepted")
	}
}

func TestFinishCapsErrorsAndDeletes(t *testing.T) {
	s := sqlitetest.New(t)
	a := job("a", "q", "k")
	a.MaxAttempts = 100
	insert(t, s, a)
	for i := range engine.MaxKeptErrors + 5 {
		j := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1}).Jobs[0]
		if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: engine.StateAvailable,
			Charge: engine.ChargeAttempt, Error: &engine.AttemptError{Message: fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	j := get(t, s, "a")
	if len(j.Errors) != engine.MaxKeptErrors || j.Errors[0].Message != "0" || j.Errors[len(j.Errors)-1].Message != fmt.Sprint(engine.MaxKeptErrors+4) {
		t.Fatalf("errors: %d, first %q", len(j.Errors), j.Errors[0].Message)
	}
	c := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1}).Jobs[0]
	got, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(c), To: engine.StateDeleted})
	if err != nil || got != nil {
		t.Fatalf("revoke: %v %v", got, err)
	}
	if _, err := s.JobGetByID(ctx, &engine.JobGetByIDParams{ID: "a"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("revoked job: %v", err)
	}
}

func TestQuarantineHoldAndRelease(t *testing.T) {
	s := sqlitetest.New(t)
	mk := func(id string) *engine.JobInsertParams {
		j := job(id, "q", "k")
		j.Fingerprint = "poison"
		return j
	}
	later := mk("later")
	later.Delay = time.Hour
	done := mk("done")
	insert(t, s, done)
	// done completes before the quarantine: terminal jobs stay as they are.
	dj := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1}).Jobs[0]
	if out, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: []engine.JobCompleteItem{{JobRef: ref(dj)}}}); err != nil || out[0] != nil {
		t.Fatal(err, out)
	}
	insert(t, s, mk("a"), mk("b"), later, mk("c"), job("innocent", "q", "k"))
	res := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 2})
	run1, run2 := res.Jobs[0], res.Jobs[1] // a and b

	q, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(run1), To: engine.StateQuarantined,
		Reason: engine.ReasonQuarantined, Charge: engine.ChargeCrash, Quarantine: true,
		Error: &engine.AttemptError{Crash: true, Message: "segfault"}, Event: engine.EventQuarantined, Actor: "reaper"})
	if err != nil {
		t.Fatal(err)
	}
	if q.State != engine.StateQuarantined || q.CrashAttempt != 1 || q.Attempt != 0 || q.Errors[0].Attempt != 1 ||
		!q.Errors[0].Crash || q.FinalizedAt == nil || q.TerminalReason != engine.ReasonQuarantined {
		t.Fatalf("quarantined job: %+v", q)
	}
	for id, want := range map[string]engine.State{
		"later": engine.StateQuarantined, "c": engine.StateQuarantined, "b": engine.StateRunning,
		"done": engine.StateCompleted, "innocent": engine.StateAvailable,
	} {
		if j := get(t, s, id); j.State != want {
			t.Fatalf("%s: %s, want %s", id, j.State, want)
		}
	}
	ev, _ := s.JobEventList(ctx, &engine.JobEventListParams{JobID: "later"})
	if len(ev) != 1 || ev[0].Kind != engine.EventHeld || ev[0].From != engine.StateScheduled {
		t.Fatalf("held events: %+v", ev)
	}
	fp, err := s.FingerprintGet(ctx, &engine.FingerprintGetParams{Fingerprint: "poison"})
	if err != nil {
		t.Fatal(err)
	}
	if fp.Status != engine.FingerprintQuarantined || fp.Kind != "k" || fp.Crashes != 1 || fp.LastError != "segfault" ||
		fp.LastJobID != "a" || fp.Held != 3 || !fp.Since.Equal(*q.FinalizedAt) {
		t.Fatalf("fingerprint %+v", fp)
	}
	// The running sibling crashes too: the record is bumped, since kept.
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(run2), To: engine.StateQuarantined,
		Reason: engine.ReasonQuarantined, Charge: engine.ChargeCrash, Quarantine: true,
		Error: &engine.AttemptError{Crash: true, Message: "again"}}); err != nil {
		t.Fatal(err)
	}
	fp2, _ := s.FingerprintGet(ctx, &engine.FingerprintGetParams{Fingerprint: "poison"})
	if fp2.Crashes != 2 || !fp2.Since.Equal(fp.Since) || fp2.LastJobID != "b" || fp2.Held != 4 {
		t.Fatalf("fingerprint %+v", fp2)
	}
	list, err := s.FingerprintList(ctx, &engine.FingerprintListParams{})
	if err != nil || len(list) != 1 || list[0].Fingerprint != "poison" {
		t.Fatalf("list %v %v", list, err)
	}
	if _, err := s.FingerprintGet(ctx, &engine.FingerprintGetParams{Fingerprint: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing fingerprint: %v", err)
	}
	if _, err := s.FingerprintRelease(ctx, &engine.FingerprintReleaseParams{Fingerprint: "nope"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("release missing fingerprint: %v", err)
	}

	n, err := s.FingerprintRelease(ctx, &engine.FingerprintReleaseParams{Fingerprint: "poison", Actor: "alice"})
	if err != nil || n != 4 {
		t.Fatalf("release: %d %v", n, err)
	}
	for _, id := range []string{"a", "b", "c", "later"} {
		j := get(t, s, id)
		if j.State != engine.StateAvailable || j.CrashAttempt != 0 || j.FinalizedAt != nil || j.TerminalReason != "" {
			t.Fatalf("released %s: %+v", id, j)
		}
		ev, _ := s.JobEventList(ctx, &engine.JobEventListParams{JobID: id})
		if last := ev[len(ev)-1]; last.Kind != engine.EventReleased || last.Actor != "alice" || last.To != engine.StateAvailable {
			t.Fatalf("%s events %+v", id, ev)
		}
	}
	fp3, _ := s.FingerprintGet(ctx, &engine.FingerprintGetParams{Fingerprint: "poison"})
	if fp3.Status != engine.FingerprintProbation || fp3.Held != 0 {
		t.Fatalf("after release %+v", fp3)
	}

	// On probation a crash quarantines again, with a new since.
	res = claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 10, Kinds: map[string]int{"k": 1}})
	if len(res.Jobs) != 5 {
		t.Fatalf("claimed %v", ids(res.Jobs))
	}
	byID := map[string]*engine.Job{}
	for _, j := range res.Jobs {
		byID[j.ID] = j
	}
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(byID["a"]), To: engine.StateQuarantined,
		Charge: engine.ChargeCrash, Quarantine: true, Error: &engine.AttemptError{Crash: true, Message: "x"}}); err != nil {
		t.Fatal(err)
	}
	fp4, _ := s.FingerprintGet(ctx, &engine.FingerprintGetParams{Fingerprint: "poison"})
	if fp4.Status != engine.FingerprintQuarantined || !fp4.Since.After(fp3.Since) || fp4.Crashes != 3 {
		t.Fatalf("requarantined %+v", fp4)
	}
	if _, err := s.FingerprintRelease(ctx, &engine.FingerprintReleaseParams{Fingerprint: "poison"}); err != nil {
		t.Fatal(err)
	}
	// A completion ends probation.
	out, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: []engine.JobCompleteItem{{JobRef: ref(byID["b"])}}})
	if err != nil || out[0] != nil {
		t.Fatal(err, out)
	}
	if _, err := s.FingerprintGet(ctx, &engine.FingerprintGetParams{Fingerprint: "poison"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("probation not ended: %v", err)
	}
}

func TestLeaseRenewAndExpiry(t *testing.T) {
	s := sqlitetest.New(t)
	insert(t, s, job("a", "q", "k"), job("b", "q", "k"), job("c", "q", "k"))
	if err := s.WorkerHeartbeat(ctx, &engine.WorkerHeartbeatParams{ID: "alive", Host: "h", PID: 1, Queues: []string{"q"}, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.WorkerHeartbeat(ctx, &engine.WorkerHeartbeatParams{ID: "gone", TTL: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	a := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1, WorkerID: "alive", LeaseDuration: time.Millisecond}).Jobs[0]
	b := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1, WorkerID: "gone", LeaseDuration: time.Millisecond}).Jobs[0]
	c := claim(t, s, engine.JobClaimParams{Queue: "q", Limit: 1, WorkerID: "alive", LeaseDuration: time.Millisecond}).Jobs[0]

	stale := ref(c)
	stale.LeaseID = "other"
	out, err := s.JobLeaseRenew(ctx, &engine.JobLeaseRenewParams{Items: []engine.JobRef{ref(c), stale}, LeaseDuration: time.Hour})
	if err != nil || out[0] != nil || !errors.Is(out[1], engine.ErrLeaseLost) {
		t.Fatalf("renew: %v %v", out, err)
	}
	if j := get(t, s, "c"); !j.Lease.ExpiresAt.After(time.Now().Add(50 * time.Minute)) {
		t.Fatalf("renewed lease %v", j.Lease.ExpiresAt)
	}
	time.Sleep(5 * time.Millisecond)
	exp, err := s.JobListExpiredLeases(ctx, &engine.JobListExpiredLeasesParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(exp) != 2 || exp[0].Job.ID != a.ID || !exp[0].WorkerAlive || exp[1].Job.ID != b.ID || exp[1].WorkerAlive ||
		exp[0].Job.Payload != nil || exp[0].Job.Lease == nil {
		t.Fatalf("expired: %+v", exp)
	}
	if exp, _ := s.JobListExpiredLeases(ctx, &engine.JobListExpiredLeasesParams{Limit: 1}); len(exp) != 1 {
		t.Fatalf("limit: %d", len(exp))
	}
	if err := s.WorkerDelete(ctx, &engine.WorkerDeleteParams{ID: "alive"}); err != nil {
		t.Fatal(err)
	}
	exp, _ = s.JobListExpiredLeases(ctx, &engine.JobListExpiredLeasesParams{Limit: 10})
	if exp[0].WorkerAlive {
		t.Fatal("deleted worker alive")
	}
}

func TestScheduleDue(t *testing.T) {
	s := sqlitetest.New(t)
	soon := func(id, q string) *engine.JobInsertParams {
		j := job(id, q, "k")
		j.Delay = 300 * time.Millisecond
		return j
	}
	never := job("never", "q3", "k")
	never.Delay = time.Hour
	insert(t, s, soon("a", "q1"), soon("b", "q2"), soon("c", "q1"), never)
	if qs, err := s.JobScheduleDue(ctx, &engine.JobScheduleDueParams{Limit: 10}); err != nil || len(qs) != 0 {
		t.Fatalf("early: %v %v", qs, err)
	}
	time.Sleep(320 * time.Millisecond)
	qs, err := s.JobScheduleDue(ctx, &engine.JobScheduleDueParams{Limit: 10})
	if err != nil || !reflect.DeepEqual(qs, []string{"q1", "q2"}) {
		t.Fatalf("due: %v %v", qs, err)
	}
	if j := get(t, s, "a"); j.State != engine.StateAvailable || j.Version != 2 {
		t.Fatalf("a: %+v", j)
	}
	if j := get(t, s, "never"); j.State != engine.StateScheduled {
		t.Fatalf("never: %s", j.State)
	}
	// A retryable job comes due too.
	j := claim(t, s, engine.JobClaimParams{Queue: "q1", Limit: 1}).Jobs[0]
	if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: engine.StateRetryable, Charge: engine.ChargeAttempt}); err != nil {
		t.Fatal(err)
	}
	if qs, _ := s.JobScheduleDue(ctx, &engine.JobScheduleDueParams{Limit: 1}); !reflect.DeepEqual(qs, []string{"q1"}) {
		t.Fatalf("retryable due: %v", qs)
	}
}

func TestDeleteExpired(t *testing.T) {
	s := sqlitetest.New(t)
	// Completed in q1, q2; archived in q1.
	insert(t, s, job("c1", "q1", "k"), job("c2", "q2", "k"), job("c3", "q1", "k"), job("x1", "q1", "k"))
	for _, q := range []string{"q1", "q2"} {
		for _, j := range claim(t, s, engine.JobClaimParams{Queue: q, Limit: 10}).Jobs {
			if j.ID == "x1" {
				if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: ref(j), To: engine.StateArchived,
					Reason: engine.ReasonSkipped, Event: engine.EventArchived}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: []engine.JobCompleteItem{{JobRef: ref(j)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	del := func(p engine.JobDeleteExpiredParams) int {
		t.Helper()
		n, err := s.JobDeleteExpired(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Long retention: nothing.
	if n := del(engine.JobDeleteExpiredParams{Retention: engine.DefaultRetention(), Limit: 100}); n != 0 {
		t.Fatalf("deleted %d", n)
	}
	// q1 keeps completed 0: its completed jobs go, at most Limit.
	p := engine.JobDeleteExpiredParams{
		Retention:      engine.DefaultRetention(),
		QueueRetention: map[string]map[engine.State]time.Duration{"q1": {engine.StateCompleted: 0}},
		Limit:          1,
	}
	if n := del(p); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	p.Limit = 100
	if n := del(p); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	for id, gone := range map[string]bool{"c1": true, "c3": true, "c2": false, "x1": false} {
		_, err := s.JobGetByID(ctx, &engine.JobGetByIDParams{ID: id})
		if gone != errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// Default retention 0 for archived, but q1's override keeps... only
	// completed: x1 goes with its events; q2's completed default applies.
	time.Sleep(2 * time.Millisecond)
	p.Retention = map[engine.State]time.Duration{engine.StateArchived: 0, engine.StateCompleted: time.Millisecond, engine.StateRunning: 0}
	p.QueueRetention = map[string]map[engine.State]time.Duration{"q2": {engine.StateCompleted: time.Hour}}
	if n := del(p); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	if _, err := s.JobGetByID(ctx, &engine.JobGetByIDParams{ID: "x1"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("x1: %v", err)
	}
	if ev, _ := s.JobEventList(ctx, &engine.JobEventListParams{JobID: "x1"}); len(ev) != 0 {
		t.Fatalf("events of a deleted job: %+v", ev)
	}
	p.QueueRetention = nil
	if n := del(p); n != 1 {
		t.Fatalf("deleted %d", n)
	}
}

func TestLeader(t *testing.T) {
	s := sqlitetest.New(t)
	lead := func(holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.LeaderAttempt(ctx, &engine.LeaderAttemptParams{Name: "maint", Holder: holder, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !lead("a", time.Hour) || lead("b", time.Hour) || !lead("a", time.Hour) {
		t.Fatal("exclusive lease")
	}
	if err := s.LeaderResign(ctx, &engine.LeaderResignParams{Name: "maint", Holder: "b"}); err != nil {
		t.Fatal(err)
	}
	if lead("b", time.Hour) {
		t.Fatal("resign by a non-holder took effect")
	}
	if err := s.LeaderResign(ctx, &engine.LeaderResignParams{Name: "maint", Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	if !lead("b", time.Millisecond) || lead("a", time.Hour) {
		t.Fatal("after resign")
	}
	time.Sleep(3 * time.Millisecond)
	if !lead("a", time.Hour) || lead("b", time.Hour) {
		t.Fatal("expired lease not taken over")
	}
	ok, err := s.LeaderAttempt(ctx, &engine.LeaderAttemptParams{Name: "other", Holder: "b", TTL: time.Hour})
	if err != nil || !ok {
		t.Fatal("leases are per name")
	}
}

func TestParseURL(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite://sluice.db":          "sluice.db",
		"sqlite://data/sluice.db":     "data/sluice.db",
		"sqlite:///var/lib/sluice.db": "/var/lib/sluice.db",
		"sqlite:rel.db":               "rel.db",
		"sqlite://my%20file.db":       "my file.db",
		"/abs/path.db":                "/abs/path.db",
		"rel/path.db":                 "rel/path.db",
	} {
		got, err := sqlite.ParseURL(in)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"sqlite://", "sqlite:", "", "postgres://localhost/x", "sqlite://x.db?mode=ro"} {
		if got, err := sqlite.ParseURL(in); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %q, %v; want an error", in, got, err)
		}
	}
}

func TestOpenMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	s1, err := sqlite.Open(ctx, "sqlite://"+path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	insert(t, s1, job("a", "q", "k"))
	// A second store on the same file, as another process would open it.
	s2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s2, "a"); j.Queue != "q" {
		t.Fatal(j)
	}
	if s1.Backend() != "sqlite" {
		t.Fatal(s1.Backend())
	}
	s1.Close()
	s2.Close()
	if _, err := s1.JobGetByID(ctx, &engine.JobGetByIDParams{ID: "a"}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := sqlite.Open(ctx, ":memory:", sqlite.Options{}); err == nil {
		t.Fatal(":memory: accepted")
	}
}

// Two stores on one file (as two processes) claim concurrently: every job
// is claimed exactly once.
func TestConcurrentClaimsTwoStores(t *testing.T) {
	path := sqlitetest.Path(t)
	var stores []*sqlite.Store
	for range 2 {
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	const n = 200
	var batch []*engine.JobInsertParams
	for i := range n {
		batch = append(batch, job(fmt.Sprintf("j%03d", i), "q", "k"))
	}
	insert(t, stores[0], batch...)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		s := stores[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := s.JobClaim(ctx, &engine.JobClaimParams{Queue: "q", WorkerID: fmt.Sprint(w), LeaseID: fmt.Sprint(w), Limit: 7, LeaseDuration: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(res.Jobs) == 0 {
					return
				}
				items := make([]engine.JobCompleteItem, len(res.Jobs))
				for i, j := range res.Jobs {
					items[i] = engine.JobCompleteItem{JobRef: ref(j)}
				}
				out, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: items})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for i, j := range res.Jobs {
					if out[i] != nil {
						t.Errorf("complete %s: %v", j.ID, out[i])
					}
					seen[j.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("%s claimed %d times", id, c)
		}
	}
}
