package backendtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// The checks call the store's writes through these helpers, which build
// the plans the engine would: the checks say what happens (a retry by
// maya, a crash into quarantine), the helpers resolve it into the params
// a store applies. When the plans change, only this file and plans.go
// change, not the checks.

// capabilities lists what s declares, by name.
func capabilities(s backend.Store) []string {
	var out []string
	for _, c := range s.Capabilities() {
		out = append(out, string(c))
	}
	return out
}

// withDeadlinePlan gives a claim the engine's write for jobs past their
// deadline when the check gave none.
func withDeadlinePlan(p *backend.JobClaimParams) {
	if p.PastDeadline.To != "" {
		return
	}
	const msg = "deadline passed before the job ran"
	p.PastDeadline = backend.ClaimDeadlineWrite{
		To: engine.StateArchived, Reason: engine.ReasonDeadlineExceeded, LastError: msg, Pattern: msg,
		Event: backend.EventWrite{Kind: engine.EventArchived, Actor: p.WorkerID, From: engine.StateAvailable,
			To: engine.StateArchived, Message: msg},
	}
}

// claimP claims with full control of the params: a lease id of its own,
// an hour's lease and kind k v1 unless given.
func claimP(t testing.TB, s backend.Store, p backend.JobClaimParams) *backend.JobClaimResult {
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
	withDeadlinePlan(&p)
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
func claimRaw(t testing.TB, s backend.Store, p backend.JobClaimParams) *backend.JobClaimResult {
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
	withDeadlinePlan(&p)
	res, err := s.JobClaim(context.Background(), &p)
	if err != nil {
		t.Fatalf("JobClaim(%s): %v", p.Queue, err)
	}
	return res
}

// claimOnce is one JobClaim with the params exactly as given, for checks
// that handle the error themselves (concurrent claimers).
func claimOnce(s backend.Store, p backend.JobClaimParams) (*backend.JobClaimResult, error) {
	withDeadlinePlan(&p)
	return s.JobClaim(context.Background(), &p)
}

// deadAtClaim is the jobs a claim archived because their deadline had
// passed.
func deadAtClaim(res *backend.JobClaimResult) []*engine.Job { return res.Dead }

// tryFinish resolves o against the job as stored and applies it, its
// error returned.
func tryFinish(s backend.Store, o Outcome) (*engine.Job, error) {
	j, err := s.JobGetByID(context.Background(), &backend.JobGetByIDParams{ID: o.ID})
	if err != nil {
		j = &engine.Job{ID: o.ID}
	}
	return s.JobFinish(context.Background(), o.Plan(j))
}

// finish is tryFinish, failing the check on any error.
func finish(t testing.TB, s backend.Store, o Outcome) *engine.Job {
	t.Helper()
	j, err := tryFinish(s, o)
	if err != nil {
		t.Fatalf("JobFinish(%s → %s): %v", o.ID, o.To, err)
	}
	return j
}

// quarantineJob crashes running job j into quarantine, its fingerprint
// with it.
func quarantineJob(t testing.TB, s backend.Store, j *engine.Job, msg string) *engine.Job {
	t.Helper()
	return finish(t, s, Outcome{JobRef: refOf(j), To: engine.StateQuarantined, Reason: engine.ReasonQuarantined,
		Charge: backend.ChargeCrash, Quarantine: true, Error: &engine.AttemptError{Crash: true, Message: msg}})
}

// retryParams, actionParams, payloadParams and withInputParams are the
// operator actions as a check states them; the helpers below turn them
// into the engine's specs and events.
type retryParams struct {
	ID       string
	Actor    string
	Force    bool
	Deadline *time.Time
}

type actionParams struct {
	ID    string
	Actor string
}

type payloadParams struct {
	ID          string
	Payload     json.RawMessage
	Fingerprint string
	Version     int64
	Actor       string
}

type withInputParams struct {
	ID          string
	NewID       string
	Payload     json.RawMessage
	Fingerprint string
	Actor       string
}

// act applies action a's spec to id with an event by actor and message.
func act(t testing.TB, s backend.Store, a engine.Action, p backend.JobActionParams, actor, message string) (*engine.Job, error) {
	t.Helper()
	spec := actionSpec(t, a)
	p.Spec = spec
	p.Event = backend.EventWrite{Kind: spec.Event, Actor: actor, To: spec.To, Message: message}
	return s.JobAction(context.Background(), &p)
}

func retryJob(t testing.TB, s backend.Store, p retryParams) (*engine.Job, error) {
	t.Helper()
	msg := ""
	if p.Force {
		if cur := tryJob(s, p.ID); cur != nil && cur.SupersededBy != "" {
			msg = "forced: superseded by " + cur.SupersededBy
		}
	}
	return act(t, s, engine.ActionRetry, backend.JobActionParams{ID: p.ID, Force: p.Force, Deadline: p.Deadline}, p.Actor, msg)
}

func cancelJob(t testing.TB, s backend.Store, p actionParams) (*engine.Job, error) {
	t.Helper()
	return act(t, s, engine.ActionCancel, backend.JobActionParams{ID: p.ID}, p.Actor, "")
}

func deleteJob(t testing.TB, s backend.Store, p actionParams) error {
	t.Helper()
	_, err := act(t, s, engine.ActionDelete, backend.JobActionParams{ID: p.ID}, p.Actor, "")
	return err
}

func releaseJob(t testing.TB, s backend.Store, p actionParams) (*engine.Job, error) {
	t.Helper()
	return act(t, s, engine.ActionRelease, backend.JobActionParams{ID: p.ID}, p.Actor, "job released")
}

func updatePayload(t testing.TB, s backend.Store, p payloadParams) (*engine.Job, error) {
	t.Helper()
	msg := ""
	if cur := tryJob(s, p.ID); cur != nil && cur.Fingerprint != p.Fingerprint {
		msg = "fingerprint " + cur.Fingerprint + " → " + p.Fingerprint
	}
	return s.JobUpdatePayload(context.Background(), &backend.JobUpdatePayloadParams{ID: p.ID, Payload: p.Payload,
		Fingerprint: p.Fingerprint, Version: p.Version,
		Event: backend.EventWrite{Kind: engine.EventPayloadEdited, Actor: p.Actor, Message: msg}})
}

func retryWithInput(t testing.TB, s backend.Store, p withInputParams) (*engine.Job, error) {
	t.Helper()
	return s.JobRetryCopy(context.Background(), &backend.JobRetryCopyParams{
		ID: p.ID, NewID: p.NewID, Payload: p.Payload, Fingerprint: p.Fingerprint,
		OriginalEvent: backend.EventWrite{Kind: engine.EventRetried, Actor: p.Actor, Message: "retried with new input as " + p.NewID},
		CopyEvent:     backend.EventWrite{Kind: engine.EventRetried, Actor: p.Actor, To: engine.StateAvailable, Message: "retry of " + p.ID + " with new input"},
	})
}

// batchParams is one batch of an operation as a check states it: the
// helper reads the operation and gives the batch its spec, narrowed
// selector, cutoff (the operation's creation) and event, as the engine's
// runner does.
type batchParams struct {
	ID     string
	Holder string
	Fence  int64
	After  string
	Limit  int
	TTL    time.Duration
}

// runBatch is one OperationProcessBatch.
func runBatch(t testing.TB, s backend.Store, p batchParams) (*backend.OperationBatchResult, error) {
	t.Helper()
	ctx := context.Background()
	op, err := s.OperationGet(ctx, &backend.OperationGetParams{ID: p.ID})
	if err != nil {
		return nil, err
	}
	spec := actionSpec(t, op.Action)
	sel, ok := spec.Narrow(op.Selector)
	if !ok {
		t.Fatalf("operation %s selects no state its action changes", p.ID)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = engine.OperationBatch
	}
	return s.OperationProcessBatch(ctx, &backend.OperationProcessBatchParams{
		ID: p.ID, Holder: p.Holder, Fence: p.Fence, After: p.After, Spec: spec, Selector: sel, Cutoff: op.CreatedAt,
		Limit: limit, Window: 10 * limit, TTL: p.TTL,
		Event: backend.EventWrite{Kind: spec.Event, Actor: op.CreatedBy, To: spec.To,
			Message: fmt.Sprintf("bulk %s (operation %s)", op.Action, op.ID)},
	})
}

// runOperation runs the operation to its end through the engine's runner,
// in batches of limit jobs: the engine decides its status.
func runOperation(t testing.TB, s backend.Store, id string, limit int) *engine.Operation {
	t.Helper()
	e, err := engine.New(s, engine.Config{OperationBatch: limit, NoMaintenance: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if did, err := e.RunOperation(context.Background()); err != nil || !did {
		t.Fatalf("run operation %s: %v %v", id, did, err)
	}
	op, err := s.OperationGet(context.Background(), &backend.OperationGetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return op
}
