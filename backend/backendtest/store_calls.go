package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Every call of a Store write whose signature is expected to change
// (JobFinish, JobClaim's deadline path, the ControlStore actions and
// OperationProcessBatch), and every type assertion to ControlStore or
// IdempotencyStore, goes through this file: when the interfaces move, only
// these helpers change, not the checks.

// controlStore returns s as an engine.ControlStore, or skips the check
// when the backend has no operator surface yet.
func controlStore(t testing.TB, s engine.Store) engine.ControlStore {
	t.Helper()
	cs, ok := s.(engine.ControlStore)
	if !ok {
		t.Skipf("SKIP: the %s store does not implement engine.ControlStore yet", s.Backend())
	}
	return cs
}

// idempotencyStore returns s as an engine.IdempotencyStore, if it is one.
func idempotencyStore(s engine.Store) (engine.IdempotencyStore, bool) {
	is, ok := s.(engine.IdempotencyStore)
	return is, ok
}

// capabilities lists what s declares beyond the Store contract.
func capabilities(s engine.Store) []string {
	if c, ok := s.(engine.Capabilities); ok {
		return c.Capabilities()
	}
	return nil
}

// claimP claims with full control of the params: a lease id of its own,
// an hour's lease and kind k v1 unless given.
func claimP(t testing.TB, s engine.Store, p engine.JobClaimParams) *engine.JobClaimResult {
	t.Helper()
	if p.LeaseID == "" {
		p.LeaseID = fmt.Sprintf("lease-%s-%d", p.WorkerID, time.Now().UnixNano())
	}
	if p.LeaseDuration == 0 {
		p.LeaseDuration = time.Hour
	}
	if p.Kinds == nil {
		p.Kinds = kindsK
	}
	res, err := s.JobClaim(context.Background(), &p)
	if err != nil {
		t.Fatalf("JobClaim(%s): %v", p.Queue, err)
	}
	for _, j := range res.Jobs {
		if j.State != engine.StateRunning {
			t.Fatalf("JobClaim returned job %s in state %s", j.ID, j.State)
		}
		checkLease(t, j)
		if j.Lease.ID != p.LeaseID || j.Lease.WorkerID != p.WorkerID {
			t.Fatalf("JobClaim: job %s lease %+v, want id %s worker %s", j.ID, *j.Lease, p.LeaseID, p.WorkerID)
		}
	}
	return res
}

// claimRaw claims with the params as given, but for defaults of worker
// w1, a lease id of its own and a minute's lease; nil Kinds stays nil (any
// kind, any version).
func claimRaw(t testing.TB, s engine.Store, p engine.JobClaimParams) *engine.JobClaimResult {
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
	res, err := s.JobClaim(context.Background(), &p)
	if err != nil {
		t.Fatalf("JobClaim(%s): %v", p.Queue, err)
	}
	return res
}

// claimOnce is one JobClaim with the params exactly as given, for checks
// that handle the error themselves (concurrent claimers).
func claimOnce(s engine.Store, p engine.JobClaimParams) (*engine.JobClaimResult, error) {
	return s.JobClaim(context.Background(), &p)
}

// deadAtClaim is the jobs a claim archived because their deadline had
// passed.
func deadAtClaim(res *engine.JobClaimResult) []*engine.Job { return res.Dead }

// tryFinish is one JobFinish, its error returned.
func tryFinish(s engine.Store, p engine.JobFinishParams) (*engine.Job, error) {
	return s.JobFinish(context.Background(), &p)
}

// finish is JobFinish, failing the test on any error.
func finish(t testing.TB, s engine.Store, p engine.JobFinishParams) *engine.Job {
	t.Helper()
	j, err := tryFinish(s, p)
	if err != nil {
		t.Fatalf("JobFinish(%s → %s): %v", p.ID, p.To, err)
	}
	return j
}

// quarantineJob crashes running job j into quarantine, its fingerprint
// with it.
func quarantineJob(t testing.TB, s engine.Store, j *engine.Job, msg string) *engine.Job {
	t.Helper()
	return finish(t, s, engine.JobFinishParams{JobRef: refOf(j), To: engine.StateQuarantined, Charge: engine.ChargeCrash,
		Quarantine: true, Error: &engine.AttemptError{Crash: true, Message: msg}})
}

func retryJob(t testing.TB, s engine.Store, p engine.JobRetryParams) (*engine.Job, error) {
	t.Helper()
	return controlStore(t, s).JobRetry(context.Background(), &p)
}

func cancelJob(t testing.TB, s engine.Store, p engine.JobActionParams) (*engine.Job, error) {
	t.Helper()
	return controlStore(t, s).JobCancel(context.Background(), &p)
}

func deleteJob(t testing.TB, s engine.Store, p engine.JobActionParams) error {
	t.Helper()
	return controlStore(t, s).JobDelete(context.Background(), &p)
}

func releaseJob(t testing.TB, s engine.Store, p engine.JobActionParams) (*engine.Job, error) {
	t.Helper()
	return controlStore(t, s).JobRelease(context.Background(), &p)
}

func updatePayload(t testing.TB, s engine.Store, p engine.JobUpdatePayloadParams) (*engine.Job, error) {
	t.Helper()
	return controlStore(t, s).JobUpdatePayload(context.Background(), &p)
}

func retryWithInput(t testing.TB, s engine.Store, p engine.JobRetryWithInputParams) (*engine.Job, error) {
	t.Helper()
	return controlStore(t, s).JobRetryWithInput(context.Background(), &p)
}

// runBatch is one OperationProcessBatch.
func runBatch(t testing.TB, s engine.Store, p engine.OperationProcessBatchParams) (*engine.Operation, error) {
	t.Helper()
	return controlStore(t, s).OperationProcessBatch(context.Background(), &p)
}

// runOperation claims the operation and runs its batches of limit jobs to
// the end.
func runOperation(t testing.TB, s engine.Store, id string, limit int) *engine.Operation {
	t.Helper()
	cs := controlStore(t, s)
	lease, err := cs.OperationClaim(context.Background(), &engine.OperationClaimParams{Holder: "runner", TTL: time.Minute})
	if err != nil || lease == nil || lease.Operation.ID != id {
		t.Fatalf("claim operation %s: %+v %v", id, lease, err)
	}
	for range 10_000 {
		op, err := runBatch(t, s, engine.OperationProcessBatchParams{
			ID: id, Holder: lease.Holder, Fence: lease.Fence, Limit: limit, TTL: time.Minute})
		if err != nil {
			t.Fatalf("operation %s: %v", id, err)
		}
		if op.Status != engine.OperationRunning {
			return op
		}
	}
	t.Fatalf("operation %s does not end", id)
	return nil
}
