package backendtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/commithook"
)

// auditKillEnv names, in the child process of RunAuditKill, the store
// the child acts on.
const auditKillEnv = "SLUICE_AUDIT_KILL_TARGET"

// RunAuditKill is the audit trail's fault test with a real death: a
// child process (the test binary again, running only testName) cancels a
// job with its audit record and SIGKILLs itself between the write's
// statements and its commit; the parent then reads, on the same store,
// neither the cancel nor the record, and a living cancel writes both.
// fresh returns a new store with what names it for another process
// (a file, a URL); open opens that name. The Audit group's
// DeathBeforeCommitLeavesNeither shows the same in process, by a panic;
// this one leaves the store to notice a client gone mid-transaction.
func RunAuditKill(t *testing.T, testName string, fresh func(t testing.TB) (backend.Store, string), open func(t testing.TB, target string) backend.Store) {
	if target := os.Getenv(auditKillEnv); target != "" {
		s := open(t, target)
		rec := auditRecord("cancel", "maya", "k1")
		ctx := commithook.With(context.Background(), func() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			for {
				time.Sleep(time.Second) // the signal is on its way
			}
		})
		if _, err := auditedCancel(ctx, s, "k1", &rec); err != nil {
			t.Fatalf("child: the cancel failed before its commit: %v", err)
		}
		t.Fatal("child: the cancel committed; the hook never ran")
	}
	s, target := fresh(t)
	if !commithook.Has(s.Backend()) {
		t.Skipf("%s writes each action as one script: no point between its statements and its commit", s.Backend())
	}
	a := auditStore(t, s)
	insertRes(t, s, djob("k1", "q", "k"))
	cmd := exec.Command(os.Args[0], "-test.run=^"+testName+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), auditKillEnv+"="+target)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed (%v):\n%s", err, out)
	}
	j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: "k1"})
	if err != nil || j.State != engine.StateAvailable {
		t.Fatalf("after the child died before its commit the job reads %v %+v, want available", err, j)
	}
	if got := auditList(t, a, engine.AuditQuery{}); len(got) != 0 {
		t.Fatalf("after the child died before its commit the trail holds %+v", got)
	}
	rec := auditRecord("cancel", "maya", "k1")
	if _, err := auditedCancel(context.Background(), s, "k1", &rec); err != nil {
		t.Fatalf("the living cancel: %v", err)
	}
	if got := auditList(t, a, engine.AuditQuery{}); len(got) != 1 || got[0].JobID != "k1" {
		t.Fatalf("after the living cancel: %+v", got)
	}
}
