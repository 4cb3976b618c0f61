package tui

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// auditFixture adds to the console's fixture a few audited actions, as
// an operator on the command line and another over SSH took them: a
// queue paused, a payload edited (its paths recorded, not its values),
// a job retried, a refused retry, a bulk retry.
func auditFixture(t *testing.T) *fixture {
	t.Helper()
	f := setup(t, false)
	cli := engine.WithOrigin(engine.WithActor(context.Background(), "maya"),
		engine.Origin{Role: engine.RoleOperator, Surface: engine.SurfaceCLI, Source: "10.0.0.7:51234"})
	ssh := engine.WithOrigin(engine.WithActor(context.Background(), "sam"),
		engine.Origin{Role: engine.RoleAdmin, Surface: engine.SurfaceSSH, Source: "SHA256:k3y"})
	if err := f.eng.PauseQueue(ssh, "billing"); err != nil {
		t.Fatal(err)
	}
	d, err := f.eng.GetJob(cli, "inv-0004", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.UpdatePayload(cli, "inv-0004", json.RawMessage(`{"invoice":4,"currency":"EUR","amount":9}`), d.Job.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Retry(cli, "inv-0004", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Retry(cli, "inv-0004", engine.RetryOptions{}); err == nil {
		t.Fatal("a retry of an available job was not refused")
	}
	if err := f.eng.SetLimit(ssh, engine.Limit{Scope: engine.LimitKind, Name: "invoice.generate", Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	dry, err := f.eng.Bulk(ssh, engine.BulkParams{Action: engine.ActionRetry, Selector: engine.Filter{Queues: []string{"email"}}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Bulk(ssh, engine.BulkParams{Plan: dry.Plan}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAuditScreen: :audit lists the trail newest first — who (actor,
// role, surface), what (the job, the queue, the edit's paths, the bulk
// action and count), how it ended — and :audit QUERY filters it; enter
// on a job's record opens its sheet.
func TestAuditScreen(t *testing.T) {
	f := auditFixture(t)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("audit")
	s.keys("<enter>")
	s.goldenAs("all", s.waitFor("Audit", "maya", "sam", "wrong_state", "paths currency", "retry 2 jobs", "billing"))

	s.keys(":")
	s.typeText("audit actor:maya action:retry")
	s.keys("<enter>")
	screen := s.waitFor("actor:maya action:retry", "wrong_state")
	s.goldenAs("filtered", screen)

	s.keys("j", "<enter>")
	s.waitFor("/ id:inv-0004", "job inv-0004", "invoice.generate (schema v1)")

	// Enter on a bulk run's record opens its operation's progress.
	s.keys("<esc>", ":")
	s.typeText("audit action:bulk")
	s.keys("<enter>")
	s.waitFor("action:bulk", "retry 2 jobs")
	s.keys("<enter>")
	s.waitFor("Bulk retry", "processed")

	// Enter on a limit's record opens the limits screen.
	s.keys("<esc>", ":")
	s.typeText("audit action:set_limit")
	s.keys("<enter>")
	s.waitFor("action:set_limit", "kind invoice.generate")
	s.keys("<enter>")
	s.waitFor("Limits — running jobs across every process")
}

// TestAuditScreenEmptyQuery: a query no record matches says so; a
// malformed one is refused on the command line.
func TestAuditScreenEmptyQuery(t *testing.T) {
	f := auditFixture(t)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("audit actor:nobody")
	s.keys("<enter>")
	s.waitFor("no audit records match actor:nobody")
	s.keys(":")
	s.typeText("audit who:nobody")
	s.keys("<enter>")
	s.waitFor("unknown key")
}
