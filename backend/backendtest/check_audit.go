package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/commithook"
)

// auditChecks: the audit trail. A record rides in the context of the one
// write that is an operator's action and is committed with it, or not at
// all: a refused write leaves none, and a process that dies between the
// write's statements and its commit leaves neither the action nor its
// record. Records list newest first, filter and page, are append-only,
// and leave by retention only, oldest first. The Control checks of the
// area (check_audit_control.go) drive the same through the engine.
func auditChecks() []check {
	return []check{
		{name: "AppendListFilterPage", fn: testAuditAppendList},
		{name: "RecordCommittedWithTheAction", fn: testAuditInActionWrite},
		{name: "RefusedWriteLeavesNoRecord", fn: testAuditRefusedWrite},
		{name: "DeathBeforeCommitLeavesNeither", fn: testAuditDeathBeforeCommit},
		{name: "RetentionDeletesOldestOnly", fn: testAuditRetention},
	}
}

// auditStore is s's audit trail; the check is skipped on a store without
// one.
func auditStore(t *testing.T, s backend.Store) backend.AuditStore {
	t.Helper()
	a, err := backend.AuditStoreOf(s)
	if err != nil {
		t.Skipf("no audit trail: %v", err)
	}
	return a
}

// auditList lists the records q selects, failing on an error.
func auditList(t *testing.T, a backend.AuditStore, q engine.AuditQuery) []*engine.AuditRecord {
	t.Helper()
	rs, err := a.AuditList(context.Background(), &backend.AuditListParams{Query: q})
	if err != nil {
		t.Fatalf("AuditList(%+v): %v", q, err)
	}
	return rs
}

func auditRecord(action, actor, job string) engine.AuditRecord {
	return engine.AuditRecord{Actor: actor, Role: engine.RoleOperator, Surface: engine.SurfaceCLI, Source: "127.0.0.1:4242",
		Action: action, JobID: job, Result: engine.AuditOK}
}

func testAuditAppendList(t *testing.T, h Harness) {
	a := auditStore(t, h.NewStore(t))
	ctx := context.Background()
	var want []*engine.AuditRecord
	for i := range 12 {
		r := auditRecord([]string{"retry", "cancel", "pause"}[i%3], []string{"maya", "ops"}[i%2], fmt.Sprintf("j%d", i%4))
		r.Operation = map[bool]string{true: "op-1"}[i%5 == 0]
		if i%3 == 2 {
			r.IDs = []string{"j1", "zz"} // an action given several jobs
		}
		r.Paths = []string{"/amount", "/items/0"}
		r.Count = int64(i)
		got, err := a.AuditAppend(ctx, &backend.AuditAppendParams{Record: r})
		if err != nil {
			t.Fatalf("AuditAppend %d: %v", i, err)
		}
		if got.ID == "" || got.At.IsZero() || got.Actor != r.Actor || got.Action != r.Action {
			t.Fatalf("AuditAppend %d answered %+v", i, got)
		}
		want = append(want, got)
	}
	slices.Reverse(want)
	all := auditList(t, a, engine.AuditQuery{Limit: 100})
	if len(all) != 12 {
		t.Fatalf("listed %d records, want 12", len(all))
	}
	for i, r := range all {
		w := want[i]
		if r.ID != w.ID || !r.At.Equal(w.At) || r.Actor != w.Actor || r.Role != w.Role || r.Surface != w.Surface ||
			r.Source != w.Source || r.Action != w.Action || r.JobID != w.JobID || r.Operation != w.Operation ||
			r.Count != w.Count || !slices.Equal(r.Paths, w.Paths) || !slices.Equal(r.IDs, w.IDs) || r.Result != w.Result {
			t.Fatalf("record %d: listed %+v, appended %+v", i, r, w)
		}
		if i > 0 && r.At.After(all[i-1].At) {
			t.Fatalf("record %d (%v) newer than the one before it (%v)", i, r.At, all[i-1].At)
		}
	}
	// Each filter selects what AuditQuery.Matches says, in the same order.
	mid := all[6].At
	for _, q := range []engine.AuditQuery{
		{Actor: "maya"}, {Action: "cancel"}, {JobID: "j1"}, {Operation: "op-1"},
		{Actor: "ops", Action: "pause"}, {Since: mid}, {Until: mid}, {Since: mid, Action: "retry"},
	} {
		q.Limit = 100
		got := auditList(t, a, q)
		var exp []string
		for _, r := range all {
			if q.Matches(r) {
				exp = append(exp, r.ID)
			}
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, exp) {
			t.Errorf("query %+v: listed %v, want %v", q, ids, exp)
		}
	}
	// Pages of 5 continue past the last one's id and cover every record once.
	var paged []string
	after := ""
	for range 10 {
		page := auditList(t, a, engine.AuditQuery{After: after, Limit: 5})
		for _, r := range page {
			paged = append(paged, r.ID)
		}
		if len(page) < 5 {
			break
		}
		after = page[len(page)-1].ID
	}
	var ids []string
	for _, r := range all {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(paged, ids) {
		t.Fatalf("paged %v, want %v", paged, ids)
	}
	if _, err := a.AuditList(ctx, &backend.AuditListParams{Query: engine.AuditQuery{After: "not a cursor"}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a bad cursor: %v, want ErrInvalid", err)
	}
}

// auditedCancel cancels job id with rec riding in the write's context.
func auditedCancel(ctx context.Context, s backend.Store, id string, rec *engine.AuditRecord) (*engine.Job, error) {
	spec, err := backend.SpecFor(engine.ActionCancel)
	if err != nil {
		return nil, err
	}
	return s.JobAction(backend.WithAuditWrite(ctx, rec), &backend.JobActionParams{ID: id, Spec: spec,
		Event: backend.EventWrite{Kind: spec.Event, Actor: rec.Actor, To: spec.To}})
}

func testAuditInActionWrite(t *testing.T, h Harness) {
	s := h.NewStore(t)
	a := auditStore(t, s)
	ctx := context.Background()
	insertRes(t, s, djob("a1", "q", "k"))
	rec := auditRecord("cancel", "maya", "a1")
	j, err := auditedCancel(ctx, s, "a1", &rec)
	if err != nil || j.State != engine.StateCancelled {
		t.Fatalf("cancel: %v %+v", err, j)
	}
	got := auditList(t, a, engine.AuditQuery{})
	if len(got) != 1 || got[0].Action != "cancel" || got[0].JobID != "a1" || got[0].Actor != "maya" || got[0].Result != engine.AuditOK {
		t.Fatalf("after one audited action: %+v", got)
	}
	// A queue pause is another write; each audited write appends its
	// own record, and a write without one appends none.
	pause := auditRecord("pause", "maya", "")
	pause.Target = "q"
	if err := s.QueuePause(backend.WithAuditWrite(ctx, &pause), &backend.QueuePauseParams{Queue: "q", Actor: "maya"}); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if err := s.QueueResume(ctx, &backend.QueuePauseParams{Queue: "q", Actor: "maya"}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	insertRes(t, s, djob("a2", "q", "k"))
	if _, err := s.JobAction(backend.WithoutAuditWrite(backend.WithAuditWrite(ctx, &rec)), &backend.JobActionParams{ID: "a2",
		Spec: mustSpec(t, engine.ActionCancel)}); err != nil {
		t.Fatalf("cancel without a record: %v", err)
	}
	got = auditList(t, a, engine.AuditQuery{})
	if len(got) != 2 || got[0].Action != "pause" || got[0].Target != "q" || got[1].Action != "cancel" {
		t.Fatalf("after a paused queue, a resume and a cancel without records: %+v", got)
	}
}

func mustSpec(t *testing.T, act engine.Action) backend.ActionSpec {
	t.Helper()
	spec, err := backend.SpecFor(act)
	if err != nil {
		t.Fatalf("spec %s: %v", act, err)
	}
	return spec
}

func testAuditRefusedWrite(t *testing.T, h Harness) {
	s := h.NewStore(t)
	a := auditStore(t, s)
	ctx := context.Background()
	insertRes(t, s, djob("r1", "q", "k"))
	rec := auditRecord("cancel", "maya", "r1")
	if _, err := auditedCancel(ctx, s, "r1", &rec); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	// Cancelled already: refused, and its record goes with it.
	if _, err := auditedCancel(ctx, s, "r1", &rec); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("second cancel: %v, want ErrWrongState", err)
	}
	if _, err := auditedCancel(ctx, s, "nobody", &rec); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("cancel of no job: %v, want ErrNotFound", err)
	}
	if got := auditList(t, a, engine.AuditQuery{}); len(got) != 1 {
		t.Fatalf("refused writes left records: %+v", got)
	}
}

// testAuditDeathBeforeCommit kills the writer between a write's
// statements and its commit (the commit hook panics, as a process dies:
// nothing after it runs) at each commit point of an audited action in
// turn — the first, then the second if there is one, and so on — and
// reads, from a second store over the same data, the action and its
// record both or neither. A store whose every write is one script has no
// such point (commithook.Has); the refusal check covers it.
func testAuditDeathBeforeCommit(t *testing.T, h Harness) {
	s := h.NewStore(t)
	if !commithook.Has(s.Backend()) {
		t.Skipf("%s writes each action as one script: no point between its statements and its commit", s.Backend())
	}
	auditStore(t, s)
	other := s
	if h.Reopen != nil {
		other = h.Reopen(t, s)
	}
	oa := auditStore(t, other)
	died := errors.New("died before commit")
	for k := 1; ; k++ {
		id := fmt.Sprintf("d%d", k)
		insertRes(t, s, djob(id, "q", "k"))
		rec := auditRecord("cancel", "maya", id)
		calls, hit := 0, false
		func() {
			defer func() {
				if r := recover(); r != nil && r != died {
					panic(r)
				}
			}()
			ctx := commithook.With(context.Background(), func() {
				if calls++; calls == k {
					hit = true
					panic(died)
				}
			})
			auditedCancel(ctx, s, id, &rec) //nolint:errcheck // it may die
		}()
		j, err := other.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatalf("commit point %d: read the job: %v", k, err)
		}
		records := auditList(t, oa, engine.AuditQuery{JobID: id})
		done := j.State == engine.StateCancelled
		if done != (len(records) == 1) || len(records) > 1 {
			t.Fatalf("killed at commit point %d of %d: the job is %s and the trail holds %d records of it; want both or neither",
				k, calls, j.State, len(records))
		}
		if !hit {
			// The action ran past every commit point: both are there.
			if !done {
				t.Fatalf("the living action left the job %s", j.State)
			}
			return
		}
		if done {
			t.Fatalf("killed at commit point %d, before any commit of the action, the job is already %s", k, j.State)
		}
	}
}

func testAuditRetention(t *testing.T, h Harness) {
	s := h.NewStore(t)
	a := auditStore(t, s)
	ctx := context.Background()
	var old []*engine.AuditRecord
	for i := range 3 {
		r, err := a.AuditAppend(ctx, &backend.AuditAppendParams{Record: auditRecord("retry", "maya", fmt.Sprintf("o%d", i))})
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		old = append(old, r)
	}
	time.Sleep(time.Second)
	young, err := a.AuditAppend(ctx, &backend.AuditAppendParams{Record: auditRecord("retry", "maya", "y")})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if _, err := a.AuditDeleteExpired(ctx, &backend.AuditDeleteExpiredParams{Retention: 0}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("retention 0: %v, want ErrInvalid (a trail is never swept whole by a zero value)", err)
	}
	// A cutoff half way between the old records and the young one, by
	// the store's clock: half a second of slack either way.
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatalf("now: %v", err)
	}
	mid := old[2].At.Add(young.At.Sub(old[2].At) / 2)
	retention := now.Sub(mid)
	n, err := a.AuditDeleteExpired(ctx, &backend.AuditDeleteExpiredParams{Retention: retention, Limit: 2})
	if err != nil || n != 2 {
		t.Fatalf("first sweep of 2: %d %v", n, err)
	}
	got := auditList(t, a, engine.AuditQuery{})
	if len(got) != 2 || got[0].ID != young.ID || got[1].ID != old[2].ID {
		t.Fatalf("after sweeping 2 the oldest first: %+v", got)
	}
	if n, err = a.AuditDeleteExpired(ctx, &backend.AuditDeleteExpiredParams{Retention: retention, Limit: 10}); err != nil || n != 1 {
		t.Fatalf("second sweep: %d %v", n, err)
	}
	if got = auditList(t, a, engine.AuditQuery{}); len(got) != 1 || got[0].ID != young.ID {
		t.Fatalf("after the sweeps: %+v", got)
	}
}
