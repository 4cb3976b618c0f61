package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// storeChecks exercise the Store contract directly, one method and one
// row of the transition table at a time.
func storeChecks() []check {
	return []check{
		{name: "InsertOneAndMany", fn: testInsertOneAndMany},
		{name: "InsertIdempotent", fn: testInsertIdempotent},
		{name: "ScheduledOrAvailableByDelay", fn: testScheduledByDelay},
		{name: "GetByID", fn: testGetByID},
		{name: "ClaimOrder", fn: testClaimOrder},
		{name: "ClaimLimitAndQueue", fn: testClaimLimit},
		{name: "ClaimKindVersionFilter", fn: testClaimKindFilter},
		{name: "ClaimSuspectsLast", fn: testClaimSuspects},
		{name: "ClaimLoneOnlyAlone", fn: testClaimLone},
		{name: "FenceAndLeaseEveryTransition", fn: testFenceAndLease},
		{name: "CompleteManyFencedPerItem", fn: testCompleteMany},
		{name: "FinishEveryRow", fn: testFinishRows},
		{name: "FinishQuarantineReleaseProbation", fn: testFinishQuarantine},
		{name: "ErrorsAppendedAndCapped", fn: testErrorsCapped},
		{name: "LeaseRenew", fn: testLeaseRenew},
		{name: "ExpiredLeasesWorkerAlive", fn: testExpiredLeases},
		{name: "ScheduleDue", fn: testScheduleDue},
		{name: "DeleteExpiredRetention", fn: testDeleteExpired},
		{name: "LeaderLease", fn: testLeaderLease},
	}
}

// running inserts a job in a queue of its own and claims it.
func running(t testing.TB, s backend.Store, id string, mods ...func(*backend.JobInsertParams)) *engine.Job {
	t.Helper()
	p := jobParams(id, "q-"+id)
	for _, m := range mods {
		m(p)
	}
	insert(t, s, p)
	return claimOne(t, s, p.Queue, id)
}

func testInsertOneAndMany(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	before := storeNow(t, s)
	deadline := before.Add(time.Hour).Truncate(time.Millisecond)
	p := &backend.JobInsertParams{
		ID: "one", Queue: "q1", Kind: "k", Payload: json.RawMessage(`{"a":1,"b":"two"}`),
		SchemaVersion: 2, Metadata: json.RawMessage(`{"tenant":"acme"}`), Tags: []string{"red", "blue"},
		Priority: 3, MaxAttempts: 7, Fingerprint: "fp-one", Deadline: &deadline, Timeout: 1500 * time.Millisecond,
	}
	got := insert(t, s, p)[0]
	if got.ID != "one" || got.State != engine.StateAvailable {
		t.Fatalf("inserted job: %+v", got)
	}
	j := getJob(t, s, "one")
	switch {
	case j.Queue != "q1" || j.Kind != "k" || j.SchemaVersion != 2 || j.Priority != 3 || j.MaxAttempts != 7:
		t.Fatalf("fields not kept: %+v", j)
	case j.Fingerprint != "fp-one" || j.Timeout != 1500*time.Millisecond:
		t.Fatalf("fingerprint or timeout not kept: %+v", j)
	case j.Deadline == nil || !j.Deadline.Equal(deadline):
		t.Fatalf("deadline %v, want %v", j.Deadline, deadline)
	case !jsonEqual(j.Payload, p.Payload) || !jsonEqual(j.Metadata, p.Metadata):
		t.Fatalf("payload %s metadata %s", j.Payload, j.Metadata)
	case !reflect.DeepEqual(j.Tags, []string{"red", "blue"}):
		t.Fatalf("tags %v", j.Tags)
	case j.State != engine.StateAvailable || j.Attempt != 0 || j.CrashAttempt != 0 || j.Fence != 0:
		t.Fatalf("new job counters: %s", describe(j))
	case j.CreatedAt.IsZero() || j.CreatedAt.Before(before.Add(-time.Second)) || j.StateChangedAt.IsZero():
		t.Fatalf("created_at %v state_changed_at %v (store now before insert %v)", j.CreatedAt, j.StateChangedAt, before)
	case j.AttemptedAt != nil || j.FinalizedAt != nil || j.TerminalReason != "" || len(j.Errors) != 0:
		t.Fatalf("new job carries history: %+v", j)
	case j.Version <= 0:
		t.Fatalf("version %d", j.Version)
	}
	checkLease(t, j)

	// A quarantined fingerprint, to be refused below.
	insert(t, s, jobParams("poison", "q-poison"))
	x := claimOne(t, s, "q-poison", "poison")
	finish(t, s, Outcome{JobRef: refOf(x), To: engine.StateQuarantined, Reason: engine.ReasonQuarantined,
		Charge: backend.ChargeCrash, Quarantine: true, Event: engine.EventQuarantined,
		Error: &engine.AttemptError{Crash: true, Message: "panic: poison"}})

	conflict := jobParams("one", "q1")
	conflict.Payload = json.RawMessage(`{"other":true}`)
	conflict.Fingerprint = "fp-other"
	quarantined := jobParams("m2", "q1")
	quarantined.Fingerprint = "fp-poison"
	batch := []*backend.JobInsertParams{jobParams("m1", "q1"), conflict, quarantined, jobParams("m3", "q1")}
	res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: batch, RefuseQuarantined: true})
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results for 4 jobs", len(res))
	}
	for _, i := range []int{0, 3} {
		if res[i].Err != nil || res[i].Job == nil || res[i].Existing || res[i].Job.ID != batch[i].ID {
			t.Fatalf("result %d: %+v, want a new job %s", i, res[i], batch[i].ID)
		}
		getJob(t, s, batch[i].ID)
	}
	if taken := (*engine.IDTakenError)(nil); !errors.As(res[1].Err, &taken) || !errors.Is(res[1].Err, engine.ErrConflict) || taken.ID != batch[1].ID {
		t.Fatalf("same id, other content: %v, want the engine's IDTakenError (ErrConflict)", res[1].Err)
	}
	if !errors.Is(res[2].Err, engine.ErrQuarantined) {
		t.Fatalf("quarantined fingerprint: %v, want ErrQuarantined", res[2].Err)
	}
	if !gone(s, "m2") {
		t.Fatal("a refused job was stored")
	}
	if j := getJob(t, s, "one"); !jsonEqual(j.Payload, p.Payload) {
		t.Fatalf("conflicting insert changed the job: payload %s", j.Payload)
	}
}

func testInsertIdempotent(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	p := jobParams("idem", "q")
	first := insert(t, s, p)[0]
	if first.State != engine.StateAvailable {
		t.Fatalf("state %s", first.State)
	}
	v := getJob(t, s, "idem")

	again := *p
	res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{&again}, RefuseQuarantined: true})
	if err != nil || len(res) != 1 {
		t.Fatalf("re-insert: %v %v", res, err)
	}
	if res[0].Err != nil || !res[0].Existing || res[0].Job == nil || res[0].Job.ID != "idem" {
		t.Fatalf("same id and content: %+v, want the existing job", res[0])
	}
	if after := getJob(t, s, "idem"); !reflect.DeepEqual(after, v) {
		t.Fatalf("an idempotent insert changed the job:\nbefore %+v\nafter  %+v", v, after)
	}

	otherPayload := *p
	otherPayload.Payload = json.RawMessage(`{"id":"idem","more":1}`)
	otherPayload.Fingerprint = "fp-idem-2"
	otherKind := *p
	otherKind.Kind = "k2"
	otherKind.Fingerprint = "fp-idem-3"
	otherQueue := *p
	otherQueue.Queue = "q2"
	for name, c := range map[string]*backend.JobInsertParams{"payload": &otherPayload, "kind": &otherKind, "queue": &otherQueue} {
		res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{c}, RefuseQuarantined: true})
		if err != nil || len(res) != 1 {
			t.Fatalf("other %s: %v %v", name, res, err)
		}
		if taken := (*engine.IDTakenError)(nil); !errors.As(res[0].Err, &taken) || !errors.Is(res[0].Err, engine.ErrConflict) {
			t.Fatalf("same id, other %s: err %v existing %v, want the engine's IDTakenError (ErrConflict)", name, res[0].Err, res[0].Existing)
		}
	}
	if after := getJob(t, s, "idem"); !reflect.DeepEqual(after, v) {
		t.Fatalf("a conflicting insert changed the job:\nbefore %+v\nafter  %+v", v, after)
	}
}

func testScheduledByDelay(t *testing.T, h Harness) {
	s := h.NewStore(t)
	before := storeNow(t, s)
	now := jobParams("now", "q")
	later := jobParams("later", "q")
	later.Delay = time.Hour
	at := before.Add(2 * time.Hour).Truncate(time.Millisecond)
	fixed := jobParams("fixed", "q")
	fixed.ScheduledAt = &at
	past := before.Add(-time.Minute)
	wins := jobParams("wins", "q")
	wins.ScheduledAt = &past
	wins.Delay = time.Hour
	insert(t, s, now, later, fixed, wins)
	after := storeNow(t, s)

	if j := getJob(t, s, "now"); j.State != engine.StateAvailable || j.ScheduledAt.After(after.Add(time.Second)) {
		t.Fatalf("no delay: state %s scheduled_at %v (now %v)", j.State, j.ScheduledAt, after)
	}
	j := getJob(t, s, "later")
	if j.State != engine.StateScheduled {
		t.Fatalf("delay 1h: state %s, want scheduled", j.State)
	}
	if j.ScheduledAt.Before(before.Add(time.Hour-time.Second)) || j.ScheduledAt.After(after.Add(time.Hour+time.Second)) {
		t.Fatalf("delay 1h: scheduled_at %v, want about %v", j.ScheduledAt, before.Add(time.Hour))
	}
	j = getJob(t, s, "fixed")
	if j.State != engine.StateScheduled || j.ScheduledAt.Sub(at).Abs() > time.Millisecond {
		t.Fatalf("scheduled_at given: state %s at %v, want scheduled at %v", j.State, j.ScheduledAt, at)
	}
	if j := getJob(t, s, "wins"); j.State != engine.StateAvailable {
		t.Fatalf("ScheduledAt in the past with a Delay: state %s, want available (ScheduledAt wins)", j.State)
	}
	// Nothing scheduled is claimable.
	if js := claim(t, s, "q", "w", 10); !slices.Equal(sortedIDs(js), []string{"now", "wins"}) {
		t.Fatalf("claimed %v, want [now wins]", ids(js))
	}
}

func sortedIDs(js []*engine.Job) []string {
	out := ids(js)
	slices.Sort(out)
	return out
}

func testGetByID(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	p := jobParams("g", "q")
	p.Payload = json.RawMessage(`{"id":"g","nested":{"b":[1,2,{"c":null}]},"s":"é\u00e9"}`)
	insert(t, s, p)
	j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Payload) != 0 {
		t.Fatalf("payload returned without being asked: %s", j.Payload)
	}
	j, err = s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "g", IncludePayload: true})
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(j.Payload, p.Payload) {
		t.Fatalf("payload %s, want %s", j.Payload, p.Payload)
	}
	if _, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "missing"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing job: %v, want ErrNotFound", err)
	}
	if _, err := s.JobEventList(ctx, &backend.JobEventListParams{JobID: "g"}); err != nil {
		t.Fatalf("events of a new job: %v", err)
	}
}

func testClaimOrder(t *testing.T, h Harness) {
	s := h.NewStore(t)
	now := storeNow(t, s)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	mk := func(id string, prio int, sched *time.Time) *backend.JobInsertParams {
		p := jobParams(id, "order")
		p.Priority = prio
		p.ScheduledAt = sched
		return p
	}
	// Inserted out of order; expected claim order: lower priority value
	// first, then earlier scheduled_at, then id.
	insert(t, s,
		mk("o-5", 2, at(-10*time.Minute)),
		mk("o-2", 1, at(-3*time.Minute)),
		mk("o-4", 1, at(-1*time.Minute)),
		mk("o-1", 1, at(-3*time.Minute)),
		mk("o-3", 1, at(-2*time.Minute)),
	)
	var got []string
	for range 6 {
		got = append(got, ids(claim(t, s, "order", "w", 1))...)
	}
	want := []string{"o-1", "o-2", "o-3", "o-4", "o-5"}
	if !slices.Equal(got, want) {
		t.Fatalf("claim order %v, want %v (priority ascending, then scheduled_at, then id)", got, want)
	}
}

func testClaimLimit(t *testing.T, h Harness) {
	s := h.NewStore(t)
	var ps []*backend.JobInsertParams
	for i := range 5 {
		ps = append(ps, jobParams(fmt.Sprintf("l-%d", i), "lim"))
	}
	ps = append(ps, jobParams("elsewhere", "other"))
	insert(t, s, ps...)
	first := claim(t, s, "lim", "w", 3)
	if len(first) != 3 {
		t.Fatalf("limit 3 claimed %d", len(first))
	}
	second := claim(t, s, "lim", "w", 10)
	if len(second) != 2 {
		t.Fatalf("then claimed %d, want the 2 left", len(second))
	}
	all := append(sortedIDs(first), sortedIDs(second)...)
	slices.Sort(all)
	if !slices.Equal(all, []string{"l-0", "l-1", "l-2", "l-3", "l-4"}) {
		t.Fatalf("claimed %v", all)
	}
	if js := claim(t, s, "lim", "w", 10); len(js) != 0 {
		t.Fatalf("empty queue claimed %v", ids(js))
	}
	if j := getJob(t, s, "elsewhere"); j.State != engine.StateAvailable || j.Fence != 0 {
		t.Fatalf("a job of another queue was claimed: %s", describe(j))
	}
}

func testClaimKindFilter(t *testing.T, h Harness) {
	s := h.NewStore(t)
	mk := func(id, kind string, v int) *backend.JobInsertParams {
		p := jobParams(id, "kinds")
		p.Kind, p.SchemaVersion = kind, v
		return p
	}
	insert(t, s, mk("a1", "a", 1), mk("a3", "a", 3), mk("b1", "b", 1), mk("a2", "a", 2))
	got := claimP(t, s, backend.JobClaimParams{Queue: "kinds", WorkerID: "w", Limit: 10, Kinds: map[string]int{"a": 2}}).Jobs
	if !slices.Equal(sortedIDs(got), []string{"a1", "a2"}) {
		t.Fatalf("kinds {a:2} claimed %v, want [a1 a2]", ids(got))
	}
	for _, id := range []string{"a3", "b1"} {
		if j := getJob(t, s, id); j.State != engine.StateAvailable || j.Fence != 0 || j.AttemptedAt != nil {
			t.Fatalf("job %s was touched by a worker that cannot run it: %s", id, describe(j))
		}
	}
	got = claimP(t, s, backend.JobClaimParams{Queue: "kinds", WorkerID: "w", Limit: 10, Kinds: map[string]int{"a": 3, "b": 1}}).Jobs
	if !slices.Equal(sortedIDs(got), []string{"a3", "b1"}) {
		t.Fatalf("kinds {a:3 b:1} claimed %v, want [a3 b1]", ids(got))
	}
}

// makeSuspect runs a job once and crashes it, then makes it due again.
func makeSuspect(t testing.TB, s backend.Store, p *backend.JobInsertParams) {
	t.Helper()
	makeSuspectN(t, s, p, 1)
}

// makeSuspectN inserts a job and crashes it n times, then makes it due
// again.
func makeSuspectN(t testing.TB, s backend.Store, p *backend.JobInsertParams, n int) {
	t.Helper()
	insert(t, s, p)
	for i := range n {
		// A new job goes before suspects, a first-crash suspect before a
		// job of two crashes: the claim takes the job being made.
		js := claimP(t, s, backend.JobClaimParams{Queue: p.Queue, WorkerID: "w-crash", Limit: 1, Suspects: 1, Lone: i > 0,
			Kinds: map[string]int{p.Kind: p.SchemaVersion}}).Jobs
		if len(js) != 1 || js[0].ID != p.ID {
			t.Fatalf("claim %s: got %v", p.ID, ids(js))
		}
		finish(t, s, Outcome{JobRef: refOf(js[0]), To: engine.StateRetryable, Charge: backend.ChargeCrash,
			Event: engine.EventCrashed, Error: &engine.AttemptError{Crash: true, Message: "panic: made suspect"}})
		scheduleDue(t, s)
		if j := getJob(t, s, p.ID); j.State != engine.StateAvailable || j.CrashAttempt != i+1 {
			t.Fatalf("suspect %s: %s", p.ID, describe(j))
		}
	}
}

// testClaimLone: a job that crashed twice or more is taken only by a claim
// that allows it (Lone), only when that claim takes nothing else, and one
// at a time; Suspects never takes it.
func testClaimLone(t *testing.T, h Harness) {
	s := h.NewStore(t)
	for _, id := range []string{"l-1", "l-2"} {
		p := jobParams(id, "lone")
		makeSuspectN(t, s, p, 2)
		// Park it elsewhere while the next one is made.
		if j := getJob(t, s, id); j.CrashAttempt != 2 {
			t.Fatalf("%s: %s", id, describe(j))
		}
	}
	makeSuspect(t, s, jobParams("f-1", "lone"))
	insert(t, s, jobParams("n-1", "lone"))
	claim := func(p backend.JobClaimParams) []string {
		p.Queue, p.WorkerID = "lone", "w"
		return sortedIDs(claimP(t, s, p).Jobs)
	}
	if got := claim(backend.JobClaimParams{Limit: 10, Suspects: 10}); !slices.Equal(got, []string{"f-1", "n-1"}) {
		t.Fatalf("suspects 10: claimed %v, want the first-crash suspect and the ordinary job only", got)
	}
	if got := claim(backend.JobClaimParams{Limit: 10, Suspects: 10}); len(got) != 0 {
		t.Fatalf("suspects 10 with only jobs of two crashes left: claimed %v", got)
	}
	insert(t, s, jobParams("n-2", "lone"))
	if got := claim(backend.JobClaimParams{Limit: 10, Lone: true}); !slices.Equal(got, []string{"n-2"}) {
		t.Fatalf("lone with an ordinary job waiting: claimed %v, want only the ordinary job", got)
	}
	got := claim(backend.JobClaimParams{Limit: 10, Suspects: 10, Lone: true})
	if len(got) != 1 || (got[0] != "l-1" && got[0] != "l-2") {
		t.Fatalf("lone with nothing else waiting: claimed %v, want exactly one job of two crashes", got)
	}
}

func testClaimSuspects(t *testing.T, h Harness) {
	s := h.NewStore(t)
	makeSuspect(t, s, jobParams("s-1", "sus"))
	makeSuspect(t, s, jobParams("s-2", "sus"))
	insert(t, s, jobParams("n-1", "sus"), jobParams("n-2", "sus"), jobParams("n-3", "sus"))

	isSuspect := func(js []*engine.Job) int {
		n := 0
		for _, j := range js {
			if strings.HasPrefix(j.ID, "s-") {
				n++
			}
		}
		return n
	}
	// The suspects are older, but a batch is filled with non-suspects first.
	got := claimP(t, s, backend.JobClaimParams{Queue: "sus", WorkerID: "w", Limit: 1, Suspects: 1}).Jobs
	if len(got) != 1 || isSuspect(got) != 0 {
		t.Fatalf("limit 1, suspects 1: claimed %v, want one non-suspect", ids(got))
	}
	got = claimP(t, s, backend.JobClaimParams{Queue: "sus", WorkerID: "w", Limit: 10, Suspects: 0}).Jobs
	if len(got) != 2 || isSuspect(got) != 0 {
		t.Fatalf("suspects 0: claimed %v, want the 2 non-suspects left", ids(got))
	}
	got = claimP(t, s, backend.JobClaimParams{Queue: "sus", WorkerID: "w", Limit: 10, Suspects: 0}).Jobs
	if len(got) != 0 {
		t.Fatalf("suspects 0 with only suspects waiting: claimed %v", ids(got))
	}
	got = claimP(t, s, backend.JobClaimParams{Queue: "sus", WorkerID: "w", Limit: 10, Suspects: 1}).Jobs
	if len(got) != 1 || isSuspect(got) != 1 {
		t.Fatalf("suspects 1: claimed %v, want exactly one suspect", ids(got))
	}
	got = claimP(t, s, backend.JobClaimParams{Queue: "sus", WorkerID: "w", Limit: 10, Suspects: 1}).Jobs
	if len(got) != 1 || isSuspect(got) != 1 {
		t.Fatalf("suspects 1 again: claimed %v, want the other suspect", ids(got))
	}
}

func testFenceAndLease(t *testing.T, h Harness) {
	s := h.NewStore(t)
	insert(t, s, jobParams("f", "fq"))
	var last *engine.Job
	step := func(what string, state engine.State, fence int64) *engine.Job {
		t.Helper()
		j := getJob(t, s, "f")
		if j.State != state || j.Fence != fence {
			t.Fatalf("after %s: state %s fence %d, want %s fence %d", what, j.State, j.Fence, state, fence)
		}
		checkLease(t, j)
		if last != nil {
			if j.Version <= last.Version {
				t.Fatalf("after %s: version %d, was %d: every write must bump it", what, j.Version, last.Version)
			}
			if j.StateChangedAt.Before(last.StateChangedAt) {
				t.Fatalf("after %s: state_changed_at went back", what)
			}
		}
		last = j
		return j
	}
	step("insert", engine.StateAvailable, 0)

	c := claimOne(t, s, "fq", "f")
	if c.Fence != 1 || c.Lease.Fence != 1 {
		t.Fatalf("claim returned fence %d lease fence %d, want 1", c.Fence, c.Lease.Fence)
	}
	j := step("claim 1", engine.StateRunning, 1)
	if !reflect.DeepEqual(j.Lease, c.Lease) {
		t.Fatalf("stored lease %+v, claim returned %+v", j.Lease, c.Lease)
	}
	if !j.Lease.ExpiresAt.After(storeNow(t, s).Add(30 * time.Minute)) {
		t.Fatalf("lease expires %v, want about an hour from now", j.Lease.ExpiresAt)
	}
	if j.AttemptedAt == nil || j.AttemptedBy != "w-test" {
		t.Fatalf("attempted_at %v by %q", j.AttemptedAt, j.AttemptedBy)
	}
	finish(t, s, Outcome{JobRef: refOf(c), To: engine.StateRetryable, Charge: backend.ChargeAttempt,
		Event: engine.EventFailed, Error: &engine.AttemptError{Message: "boom"}})
	j = step("error", engine.StateRetryable, 1)
	if j.AttemptedBy != "w-test" || j.AttemptedAt == nil {
		t.Fatalf("attempted_by/at not kept after the lease cleared: %q %v", j.AttemptedBy, j.AttemptedAt)
	}
	scheduleDue(t, s)
	step("due", engine.StateAvailable, 1)

	c = claimOne(t, s, "fq", "f")
	step("claim 2", engine.StateRunning, 2)
	finish(t, s, Outcome{JobRef: refOf(c), To: engine.StateScheduled, Event: engine.EventSnoozed})
	step("snooze", engine.StateScheduled, 2)
	scheduleDue(t, s)
	step("due", engine.StateAvailable, 2)

	c = claimOne(t, s, "fq", "f")
	step("claim 3", engine.StateRunning, 3)
	finish(t, s, Outcome{JobRef: refOf(c), To: engine.StateAvailable, Event: engine.EventLeaseLost})
	step("release", engine.StateAvailable, 3)

	c = claimOne(t, s, "fq", "f")
	step("claim 4", engine.StateRunning, 4)
	res, err := s.JobCompleteMany(context.Background(), &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(c)}}, EndProbation: true})
	if err != nil || len(res) != 1 || res[0] != nil {
		t.Fatalf("complete: %v %v", res, err)
	}
	j = step("success", engine.StateCompleted, 4)
	if j.FinalizedAt == nil || j.Attempt != 1 {
		t.Fatalf("completed: finalized_at %v attempt %d", j.FinalizedAt, j.Attempt)
	}
}

func testCompleteMany(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("c1", "cq"), jobParams("c2", "cq"), jobParams("c3", "cq"), jobParams("c4", "cq"))
	js := claim(t, s, "cq", "w", 4)
	if len(js) != 4 {
		t.Fatalf("claimed %d", len(js))
	}
	byID := map[string]*engine.Job{}
	for _, j := range js {
		byID[j.ID] = j
	}
	c2before := getJob(t, s, "c2")
	c3before := getJob(t, s, "c3")
	badFence := refOf(byID["c2"])
	badFence.Fence++
	badLease := refOf(byID["c3"])
	badLease.LeaseID = "not-the-lease"
	items := []backend.JobCompleteItem{
		{JobRef: refOf(byID["c1"])},
		{JobRef: badFence},
		{JobRef: badLease},
		{JobRef: refOf(byID["c4"]), Delete: true},
		{JobRef: backend.JobRef{ID: "nope", LeaseID: "x", Fence: 1}},
	}
	res, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items, EndProbation: true})
	if err != nil {
		t.Fatalf("JobCompleteMany: %v", err)
	}
	if len(res) != len(items) {
		t.Fatalf("%d results for %d items", len(res), len(items))
	}
	if res[0] != nil || res[3] != nil {
		t.Fatalf("good items refused: %v", res)
	}
	if !errors.Is(res[1], engine.ErrLeaseLost) || !errors.Is(res[2], engine.ErrLeaseLost) {
		t.Fatalf("stale fence: %v; other lease: %v; want ErrLeaseLost", res[1], res[2])
	}
	if !errors.Is(res[4], engine.ErrLeaseLost) && !errors.Is(res[4], engine.ErrNotFound) {
		t.Fatalf("missing job: %v, want ErrLeaseLost or ErrNotFound", res[4])
	}
	c1 := getJob(t, s, "c1")
	if c1.State != engine.StateCompleted || c1.FinalizedAt == nil || c1.Attempt != 0 || c1.Fence != 1 {
		t.Fatalf("c1: %s", describe(c1))
	}
	checkLease(t, c1)
	if !gone(s, "c4") {
		t.Fatal("c4 completed with Delete but its row is still there")
	}
	if c2 := getJob(t, s, "c2"); !reflect.DeepEqual(c2, c2before) {
		t.Fatalf("a refused item changed c2:\nbefore %+v\nafter  %+v", c2before, c2)
	}
	if c3 := getJob(t, s, "c3"); !reflect.DeepEqual(c3, c3before) {
		t.Fatalf("a refused item changed c3:\nbefore %+v\nafter  %+v", c3before, c3)
	}
	// Completing twice: the lease is gone.
	res, err = s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items[:1], EndProbation: true})
	if err != nil || len(res) != 1 || !errors.Is(res[0], engine.ErrLeaseLost) {
		t.Fatalf("second completion of c1: %v %v, want ErrLeaseLost", res, err)
	}
}

// finishRow is one non-success row of the transition table, written
// through JobFinish.
type finishRow struct {
	name   string
	params func(ref backend.JobRef) Outcome
	// want is the state after; StateDeleted when the row is gone.
	want    engine.State
	reason  engine.TerminalReason
	attempt int
	crash   int
	errs    int
	// future: scheduled_at is about an hour ahead.
	future bool
}

func testFinishRows(t *testing.T, h Harness) {
	s := h.NewStore(t)
	errMsg := func(m string) *engine.AttemptError { return &engine.AttemptError{Message: m, Trace: "trace of " + m} }
	rows := []finishRow{
		{name: "retryable", want: engine.StateRetryable, attempt: 1, errs: 1, future: true,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateRetryable, Charge: backend.ChargeAttempt,
					Delay: time.Hour, Error: errMsg("boom"), Event: engine.EventFailed}
			}},
		{name: "attempts-exhausted", want: engine.StateArchived, reason: engine.ReasonAttemptsExhausted, attempt: 1, errs: 1,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateArchived, Reason: engine.ReasonAttemptsExhausted,
					Charge: backend.ChargeAttempt, Error: errMsg("last"), Event: engine.EventArchived}
			}},
		{name: "skipped", want: engine.StateArchived, reason: engine.ReasonSkipped, errs: 1,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateArchived, Reason: engine.ReasonSkipped,
					Error: errMsg("skipped: no"), Event: engine.EventArchived}
			}},
		{name: "deadline-exceeded", want: engine.StateArchived, reason: engine.ReasonDeadlineExceeded, errs: 1,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateArchived, Reason: engine.ReasonDeadlineExceeded,
					Error: errMsg("deadline passed"), Event: engine.EventArchived}
			}},
		{name: "undecodable", want: engine.StateUndecodable, reason: engine.ReasonUndecodable, errs: 1,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateUndecodable, Reason: engine.ReasonUndecodable,
					Error: errMsg("no upcaster"), Event: engine.EventUndecodable}
			}},
		{name: "revoke", want: engine.StateDeleted,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateDeleted}
			}},
		{name: "snooze", want: engine.StateScheduled, future: true,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateScheduled, Delay: time.Hour, Event: engine.EventSnoozed}
			}},
		{name: "shutdown", want: engine.StateAvailable,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateAvailable, Event: engine.EventShutdown}
			}},
		{name: "lease-lost", want: engine.StateAvailable,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateAvailable, Event: engine.EventLeaseLost}
			}},
		{name: "crash", want: engine.StateRetryable, crash: 1, errs: 1, future: true,
			params: func(r backend.JobRef) Outcome {
				return Outcome{JobRef: r, To: engine.StateRetryable, Charge: backend.ChargeCrash, Delay: time.Hour,
					Error: &engine.AttemptError{Crash: true, Message: "panic: x", Trace: "goroutine 1 [running]:\npanic(...)"},
					Event: engine.EventCrashed}
			}},
	}
	for _, row := range rows {
		id := "fin-" + row.name
		c := running(t, s, id)
		before := getJob(t, s, id)
		p := row.params(refOf(c))
		p.Actor, p.Message = "w-test", "outcome "+row.name

		// A stale fence changes nothing.
		stale := p
		stale.Fence--
		if _, err := tryFinish(s, stale); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("%s with a stale fence: %v, want ErrLeaseLost", row.name, err)
		}
		if j := getJob(t, s, id); !reflect.DeepEqual(j, before) {
			t.Fatalf("%s: a refused JobFinish changed the job", row.name)
		}

		now := storeNow(t, s)
		written, err := tryFinish(s, p)
		if err != nil {
			t.Fatalf("%s: JobFinish: %v", row.name, err)
		}
		if row.want == engine.StateDeleted {
			if written != nil {
				t.Fatalf("%s: JobFinish returned %s for a deleted job", row.name, describe(written))
			}
			if !gone(s, id) {
				t.Fatalf("%s: the row is still there", row.name)
			}
			continue
		}
		j := getJob(t, s, id)
		if written == nil || written.State != j.State || written.Version != j.Version {
			t.Fatalf("%s: JobFinish returned %s, stored %s", row.name, describe(written), describe(j))
		}
		if j.State != row.want || j.TerminalReason != row.reason || j.Attempt != row.attempt || j.CrashAttempt != row.crash {
			t.Fatalf("%s: %s, want state=%s reason=%q attempt=%d crash=%d", row.name, describe(j), row.want, row.reason, row.attempt, row.crash)
		}
		if j.Fence != 1 || j.MaxAttempts != before.MaxAttempts {
			t.Fatalf("%s: fence %d max_attempts %d changed", row.name, j.Fence, j.MaxAttempts)
		}
		checkLease(t, j)
		if j.State.Terminal() != (j.FinalizedAt != nil) {
			t.Fatalf("%s: finalized_at %v for a %s job", row.name, j.FinalizedAt, j.State)
		}
		if row.future && j.ScheduledAt.Before(now.Add(59*time.Minute)) {
			t.Fatalf("%s: scheduled_at %v, want about an hour after %v", row.name, j.ScheduledAt, now)
		}
		if len(j.Errors) != row.errs {
			t.Fatalf("%s: %d errors, want %d: %+v", row.name, len(j.Errors), row.errs, j.Errors)
		}
		if row.errs == 1 {
			e := j.Errors[0]
			if e.Message != p.Error.Message || e.Trace != p.Error.Trace || e.Crash != p.Error.Crash {
				t.Fatalf("%s: error %+v, want %+v", row.name, e, *p.Error)
			}
			if e.At.IsZero() || e.At.Before(now.Add(-time.Second)) {
				t.Fatalf("%s: error at %v (store now %v)", row.name, e.At, now)
			}
			if e.Attempt != 1 {
				t.Fatalf("%s: error of the first attempt numbered %d, want 1", row.name, e.Attempt)
			}
		}
		ev := events(t, s, id)
		if len(ev) == 0 {
			t.Fatalf("%s: no event written", row.name)
		}
		last := ev[len(ev)-1]
		if last.Kind != p.Event || last.To != row.want || last.From != engine.StateRunning || last.Actor != "w-test" || last.JobID != id {
			t.Fatalf("%s: last event %+v, want %s running→%s by w-test", row.name, last, p.Event, row.want)
		}
		if last.At.IsZero() {
			t.Fatalf("%s: event without a time", row.name)
		}
		// The lease is gone: a second write is refused.
		if _, err := tryFinish(s, p); !errors.Is(err, engine.ErrLeaseLost) {
			t.Fatalf("%s written twice: %v, want ErrLeaseLost", row.name, err)
		}
	}
}

func testFinishQuarantine(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	const fp = "fp-poison"
	same := func(id, queue string) *backend.JobInsertParams {
		p := jobParams(id, queue)
		p.Payload = json.RawMessage(`{"poison":true}`)
		p.Fingerprint = fp
		return p
	}
	// X runs and crashes; Y waits (available), Z waits (scheduled); R runs
	// elsewhere; C completed before; O waits with another fingerprint.
	insert(t, s, same("x", "qx"))
	x := claimOne(t, s, "qx", "x")
	insert(t, s, same("r", "qr"))
	r := claimOne(t, s, "qr", "r")
	insert(t, s, same("c", "qc"))
	c := claimOne(t, s, "qc", "c")
	if res, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(c)}}, EndProbation: true}); err != nil || res[0] != nil {
		t.Fatalf("complete c: %v %v", res, err)
	}
	z := same("z", "qw")
	z.Delay = time.Hour
	insert(t, s, same("y", "qw"), z, jobParams("o", "qw"))

	finish(t, s, Outcome{JobRef: refOf(x), To: engine.StateQuarantined, Reason: engine.ReasonQuarantined,
		Charge: backend.ChargeCrash, Quarantine: true, Event: engine.EventQuarantined, Actor: "w-test",
		Error: &engine.AttemptError{Crash: true, Message: "panic: poison pill", Trace: "goroutine 7 [running]"}})

	xj := getJob(t, s, "x")
	if xj.State != engine.StateQuarantined || xj.TerminalReason != engine.ReasonQuarantined || xj.CrashAttempt != 1 || xj.Attempt != 0 || xj.FinalizedAt == nil {
		t.Fatalf("x: %s", describe(xj))
	}
	checkLease(t, xj)
	rec, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
	if err != nil {
		t.Fatalf("FingerprintGet: %v", err)
	}
	if rec.Fingerprint != fp || rec.Status != engine.FingerprintQuarantined || rec.Kind != "k" || rec.Crashes != 1 ||
		!strings.Contains(rec.LastError, "poison pill") || rec.LastJobID != "x" || rec.Since.IsZero() {
		t.Fatalf("quarantine record %+v", rec)
	}
	if rec.Held != 3 {
		t.Fatalf("record holds %d jobs, want 3 (x, and the waiting y and z)", rec.Held)
	}
	for _, id := range []string{"y", "z"} {
		if j := getJob(t, s, id); j.State != engine.StateQuarantined || j.CrashAttempt != 0 {
			t.Fatalf("waiting sibling %s not held: %s", id, describe(j))
		}
	}
	if j := getJob(t, s, "r"); j.State != engine.StateRunning || j.Fence != r.Fence {
		t.Fatalf("running sibling r must finish undisturbed: %s", describe(j))
	}
	if j := getJob(t, s, "c"); j.State != engine.StateCompleted {
		t.Fatalf("terminal sibling c changed: %s", describe(j))
	}
	if j := getJob(t, s, "o"); j.State != engine.StateAvailable {
		t.Fatalf("another fingerprint's job changed: %s", describe(j))
	}
	if js := claim(t, s, "qw", "w", 10); !slices.Equal(ids(js), []string{"o"}) {
		t.Fatalf("claim on qw took %v, want only o", ids(js))
	}
	list, err := s.FingerprintList(ctx, &backend.FingerprintListParams{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Fingerprint != fp || list[0].Status != engine.FingerprintQuarantined {
		t.Fatalf("FingerprintList: %v %v", list, err)
	}
	res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{same("n", "qw")}, RefuseQuarantined: true})
	if err != nil || !errors.Is(res[0].Err, engine.ErrQuarantined) {
		t.Fatalf("insert of a quarantined fingerprint: %v %v, want ErrQuarantined", res, err)
	}
	if !gone(s, "n") {
		t.Fatal("a refused job was stored")
	}

	// Release: held jobs back to available with crash counters reset; the
	// record stays, on probation.
	n, err := s.FingerprintRelease(ctx, releasePlan(t, fp, "ops"))
	if err != nil || n != 3 {
		t.Fatalf("FingerprintRelease: %d %v, want 3", n, err)
	}
	for _, id := range []string{"x", "y", "z"} {
		j := getJob(t, s, id)
		if j.State != engine.StateAvailable || j.CrashAttempt != 0 || j.TerminalReason != "" || j.FinalizedAt != nil {
			t.Fatalf("released %s: %s finalized_at %v", id, describe(j), j.FinalizedAt)
		}
		checkLease(t, j)
	}
	if j := getJob(t, s, "x"); len(j.Errors) != 1 {
		t.Fatalf("release dropped x's errors: %+v", j.Errors)
	}
	rec, err = s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
	if err != nil || rec.Status != engine.FingerprintProbation || rec.Held != 0 {
		t.Fatalf("after release: %+v %v, want probation holding none", rec, err)
	}
	insert(t, s, same("n", "qw")) // enqueues are accepted again

	// On probation the engine quarantines at the next crash.
	x = claimOne(t, s, "qx", "x")
	finish(t, s, Outcome{JobRef: refOf(x), To: engine.StateQuarantined, Reason: engine.ReasonQuarantined,
		Charge: backend.ChargeCrash, Quarantine: true, Event: engine.EventQuarantined,
		Error: &engine.AttemptError{Crash: true, Message: "panic: again"}})
	rec, err = s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
	if err != nil || rec.Status != engine.FingerprintQuarantined || rec.Crashes != 2 || !strings.Contains(rec.LastError, "again") {
		t.Fatalf("quarantined again: %+v %v", rec, err)
	}
	n, err = s.FingerprintRelease(ctx, releasePlan(t, fp, "ops"))
	if err != nil || n != 4 {
		t.Fatalf("second release: %d %v, want 4 (x y z n)", n, err)
	}
	// A completion ends probation.
	js := claim(t, s, "qx", "w", 1)
	if len(js) != 1 {
		t.Fatalf("claim x after release: %v", ids(js))
	}
	if res, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(js[0])}}, EndProbation: true}); err != nil || res[0] != nil {
		t.Fatalf("complete x: %v %v", res, err)
	}
	rec, err = s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: fp})
	if err == nil && rec.Status == engine.FingerprintProbation {
		t.Fatalf("a completion did not end probation: %+v", rec)
	}
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("FingerprintGet: %v", err)
	}
	if _, err := s.FingerprintGet(ctx, &backend.FingerprintGetParams{Fingerprint: "fp-none"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("unknown fingerprint: %v, want ErrNotFound", err)
	}
}

func testErrorsCapped(t *testing.T, h Harness) {
	s := h.NewStore(t)
	p := jobParams("e", "eq")
	p.MaxAttempts = 1000
	insert(t, s, p)
	const n = engine.MaxKeptErrors + 5
	for i := range n {
		c := claimOne(t, s, "eq", "e")
		crash := i%5 == 4
		fp := Outcome{JobRef: refOf(c), To: engine.StateRetryable, Event: engine.EventFailed,
			Error: &engine.AttemptError{Message: fmt.Sprintf("e%d", i), Crash: crash}}
		if crash {
			fp.Charge, fp.Event, fp.Error.Trace = backend.ChargeCrash, engine.EventCrashed, fmt.Sprintf("trace %d", i)
		} else {
			fp.Charge = backend.ChargeAttempt
		}
		finish(t, s, fp)
		scheduleDue(t, s)
		if i < engine.MaxKeptErrors {
			if got := len(getJob(t, s, "e").Errors); got != i+1 {
				t.Fatalf("after %d failures: %d errors", i+1, got)
			}
		}
	}
	j := getJob(t, s, "e")
	if len(j.Errors) != engine.MaxKeptErrors {
		t.Fatalf("%d errors kept, want %d", len(j.Errors), engine.MaxKeptErrors)
	}
	want := []int{0}
	for i := n - (engine.MaxKeptErrors - 1); i < n; i++ {
		want = append(want, i)
	}
	for k, e := range j.Errors {
		i := want[k]
		if e.Message != fmt.Sprintf("e%d", i) || e.Crash != (i%5 == 4) {
			t.Fatalf("error %d is %+v, want e%d (the first and the latest are kept)", k, e, i)
		}
		if e.Crash && e.Trace != fmt.Sprintf("trace %d", i) {
			t.Fatalf("crash error %d lost its trace: %+v", k, e)
		}
	}
	if j.CrashAttempt != 5 || j.Attempt != n-5 {
		t.Fatalf("counters: %s, want attempt %d crash 5", describe(j), n-5)
	}
}
