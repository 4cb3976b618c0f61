package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// auditControlChecks drive the trail through Control (the engine, or
// the HTTP client in the API's run): every mutating action leaves
// exactly one record, a refused one included, with its actor and
// origin; a dry run and a program's own enqueues leave none.
func auditControlChecks() []check {
	return []check{
		{name: "ControlOneRecordPerAction", fn: testAuditControlOnePerAction},
		{name: "ControlEveryKindOfAction", fn: testAuditControlEveryKind},
	}
}

// auditPage lists the newest records through f's Control; it skips the
// check on a store without a trail.
func (f *ctlFixture) auditPage(t *testing.T, q engine.AuditQuery) []*engine.AuditRecord {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 100
	}
	p, err := f.c.Audit(f.ctx, q)
	if errors.Is(err, engine.ErrUnsupported) {
		t.Skipf("no audit trail: %v", err)
	}
	if err != nil {
		t.Fatalf("Audit(%+v): %v", q, err)
	}
	return p.Records
}

func testAuditControlOnePerAction(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	ids := f.dead(t, "billing", "b", 3, "x")
	if got := f.auditPage(t, engine.AuditQuery{}); len(got) != 0 {
		t.Fatalf("a program's enqueues and its jobs' deaths left records: %+v", got)
	}
	type want struct{ action, result, job string }
	var wants []want
	step := func(w want, err error, refused bool) {
		t.Helper()
		if refused != (err != nil) {
			t.Fatalf("%s %s: %v", w.action, w.job, err)
		}
		wants = append(wants, w)
		got := f.auditPage(t, engine.AuditQuery{})
		if len(got) != len(wants) {
			t.Fatalf("after %s %s: %d records, want %d: %+v", w.action, w.job, len(got), len(wants), got)
		}
		r := got[0]
		if r.Action != w.action || r.Result != w.result || r.JobID != w.job || r.Actor != "maya" || r.Surface == "" || r.ID == "" || r.At.IsZero() {
			t.Fatalf("after %s %s the newest record is %+v, want %+v", w.action, w.job, r, w)
		}
	}
	_, err := f.c.Retry(f.ctx, ids[0], engine.RetryOptions{})
	step(want{"retry", engine.AuditOK, ids[0]}, err, false)
	step(want{"delete", engine.AuditOK, ids[1]}, f.c.Delete(f.ctx, ids[1]), false)
	_, err = f.c.Retry(f.ctx, ids[1], engine.RetryOptions{})
	step(want{"retry", "not_found", ids[1]}, err, true)

	d, err := f.c.GetJob(f.ctx, ids[2], true)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	var p map[string]any
	if err := json.Unmarshal(d.Job.Payload, &p); err != nil {
		t.Fatalf("payload: %v", err)
	}
	p["msg"], p["extra"] = "secret value", 1
	edited, _ := json.Marshal(p)
	_, err = f.c.UpdatePayload(f.ctx, ids[2], edited, d.Job.Version)
	step(want{"patch", engine.AuditOK, ids[2]}, err, false)
	if r := f.auditPage(t, engine.AuditQuery{})[0]; !slices.Equal(r.Paths, []string{"extra", "msg"}) {
		t.Fatalf("the edit's record names paths %q, want [extra msg] and no value", r.Paths)
	}
	_, err = f.c.UpdatePayload(f.ctx, ids[2], edited, d.Job.Version)
	step(want{"patch", "conflict", ids[2]}, err, true)

	step(want{"pause", engine.AuditOK, ""}, f.c.PauseQueue(f.ctx, "email"), false)
	step(want{"resume", engine.AuditOK, ""}, f.c.ResumeQueue(f.ctx, "email"), false)
	if r := f.auditPage(t, engine.AuditQuery{Action: "pause"}); len(r) != 1 || r[0].Target != "email" {
		t.Fatalf("the pause's record: %+v", r)
	}

	res, err := f.c.Apply(f.ctx, engine.ActionDelete, []string{ids[2], "nobody"})
	if err != nil || len(res) != 2 {
		t.Fatalf("apply: %v %+v", err, res)
	}
	step(want{"apply", engine.AuditOK, ""}, nil, false)
	if r := f.auditPage(t, engine.AuditQuery{})[0]; r.Applied != engine.ActionDelete || r.Count != 2 || r.Detail != "1 of 2 refused" ||
		!slices.Equal(r.IDs, []string{ids[2], "nobody"}) {
		t.Fatalf("the apply's record: %+v", r)
	}

	f.dead(t, "email", "e", 2, "y")
	dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived queue:email"), DryRun: true})
	if err != nil || dry.Plan == nil || dry.Matched != 2 {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
	if got := f.auditPage(t, engine.AuditQuery{}); len(got) != len(wants) {
		t.Fatalf("a dry run left a record: %+v", got[0])
	}
	run, err := f.c.Bulk(f.ctx, engine.BulkParams{Plan: dry.Plan})
	step(want{"bulk", engine.AuditOK, ""}, err, false)
	r := f.auditPage(t, engine.AuditQuery{})[0]
	if r.Operation == "" || r.Operation != run.Operation.ID || r.Applied != engine.ActionRetry || r.Count != 2 || r.Selector == "" ||
		r.PlanCutoff == nil || !r.PlanCutoff.Equal(dry.Plan.Cutoff) {
		t.Fatalf("the bulk run's record: %+v (operation %s)", r, run.Operation.ID)
	}
	if got := f.auditPage(t, engine.AuditQuery{Operation: run.Operation.ID}); len(got) != 1 || got[0].ID != r.ID {
		t.Fatalf("by operation: %+v", got)
	}

	// Filters through Control: by job (its delete and the refused retry),
	// by action, by actor.
	byJob := f.auditPage(t, engine.AuditQuery{JobID: ids[1]})
	if len(byJob) != 2 || byJob[0].Result != "not_found" || byJob[1].Action != "delete" {
		t.Fatalf("by job %s: %+v", ids[1], byJob)
	}
	// A job named among an apply's ids is found by the job too.
	if byJob = f.auditPage(t, engine.AuditQuery{JobID: "nobody"}); len(byJob) != 1 || byJob[0].Action != "apply" {
		t.Fatalf("by job nobody (one of an apply's ids): %+v", byJob)
	}
	if got := f.auditPage(t, engine.AuditQuery{Action: "retry"}); len(got) != 2 {
		t.Fatalf("by action retry: %+v", got)
	}
	if got := f.auditPage(t, engine.AuditQuery{Actor: "nobody"}); len(got) != 0 {
		t.Fatalf("by another actor: %+v", got)
	}
	// Pages of two cover the trail once, newest first.
	all := f.auditPage(t, engine.AuditQuery{})
	var paged []*engine.AuditRecord
	q := engine.AuditQuery{Limit: 2}
	for range 20 {
		p, err := f.c.Audit(f.ctx, q)
		if err != nil {
			t.Fatalf("page: %v", err)
		}
		paged = append(paged, p.Records...)
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if len(paged) != len(all) {
		t.Fatalf("paged %d records, listed %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i].ID != all[i].ID {
			t.Fatalf("page order differs at %d: %s vs %s", i, paged[i].ID, all[i].ID)
		}
	}
}

// testAuditControlEveryKind: the other actions of Control, each exactly
// one record naming its target: an error group's verdicts, a limit, a
// signal, a retry with new input, a schedule's pause, resume and run
// now, an operation's cancel. Each store writes them through another
// write (and on Redis another script), so each is counted.
func testAuditControlEveryKind(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	ids := f.dead(t, "billing", "k", 2, "card declined")
	f.auditPage(t, engine.AuditQuery{}) // skips without a trail
	count := 0
	step := func(action, target string, err error) {
		t.Helper()
		if err != nil {
			if errors.Is(err, engine.ErrUnsupported) {
				count++ // the store lacks the feature: its refusal is recorded
				return
			}
			t.Fatalf("%s: %v", action, err)
		}
		count++
		got := f.auditPage(t, engine.AuditQuery{Action: action})
		if len(got) == 0 || got[0].Result != engine.AuditOK || (target != "" && got[0].Target != target) {
			t.Fatalf("%s: records %+v, want the newest ok naming %q", action, got, target)
		}
		if all := f.auditPage(t, engine.AuditQuery{}); len(all) < count {
			t.Fatalf("%s: %d records after %d actions", action, len(all), count)
		}
	}
	g := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing")
	_, err := f.c.ResolveErrorGroup(f.ctx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "fixed"})
	step("resolve_error_group", g.ID, err)
	_, err = f.c.IgnoreErrorGroup(f.ctx, engine.ErrorGroupIgnoreParams{ID: g.ID})
	step("ignore_error_group", g.ID, err)
	_, err = f.c.UnignoreErrorGroup(f.ctx, engine.ErrorGroupUnignoreParams{ID: g.ID})
	step("unignore_error_group", g.ID, err)
	step("set_limit", "kind fail", f.c.SetLimit(f.ctx, engine.Limit{Scope: engine.LimitKind, Name: "fail", Concurrency: 3}))
	_, err = f.c.RetryWithInput(f.ctx, ids[0], engine.RetryWithInputParams{ID: ids[0] + "-fixed", Payload: []byte(`{"i":0,"msg":"ok"}`)})
	step("retry_with_input", ids[0]+"-fixed", err)
	later, err := f.e.Enqueue(context.Background(), engine.EnqueueParams{Queue: "later", Kind: "ok", Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.c.Signal(f.ctx, later.ID, "approved", []byte(`{"by":"maya"}`))
	step("signal", "approved", err)
	if ss, err := backend.ScheduleStoreOf(f.s); err == nil {
		if err := ss.ScheduleUpsert(context.Background(), &backend.ScheduleUpsertParams{Schedules: []backend.ScheduleDef{
			{Name: "nightly", Spec: "@daily", Zone: "UTC"}}}); err != nil {
			t.Fatal(err)
		}
		step("pause_schedule", "nightly", f.c.PauseSchedule(f.ctx, "nightly"))
		step("resume_schedule", "nightly", f.c.ResumeSchedule(f.ctx, "nightly"))
		step("trigger_schedule", "nightly", f.c.TriggerSchedule(f.ctx, "nightly"))
	}
	dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: mustQuery(t, "state:archived queue:billing"), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(time.Hour)
	run, err := f.c.Bulk(f.ctx, engine.BulkParams{Plan: dry.Plan, StartAt: &start})
	step("bulk", "", err)
	_, err = f.c.CancelOperation(f.ctx, run.Operation.ID)
	step("cancel_operation", "", err)
	if r := f.auditPage(t, engine.AuditQuery{Action: "cancel_operation"}); r[0].Operation != run.Operation.ID {
		t.Fatalf("the cancel's record names operation %q, want %s", r[0].Operation, run.Operation.ID)
	}
	if all := f.auditPage(t, engine.AuditQuery{}); len(all) != count {
		t.Fatalf("%d records after %d actions: %+v", len(all), count, all)
	}
}
