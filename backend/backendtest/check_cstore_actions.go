package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

func testCStoreOperatorActions(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	ctx := context.Background()
	past := storeNow(t, s).Add(-time.Hour)
	dl := djob("dl", "q", "k")
	dl.Deadline = &past
	insertRes(t, s, djob("a", "q", "k"), djob("b", "q", "k"))
	kill(t, s, "q", 2, engine.StateArchived, func(int) string { return "dial tcp 10.1.1.1:80: refused" })
	insertRes(t, s, dl)
	if res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 1}); len(deadAtClaim(res)) != 1 {
		t.Fatalf("deadline archive: %+v", res)
	}
	d := getJob(t, s, "dl")
	if d.State != engine.StateArchived || d.TerminalReason != engine.ReasonDeadlineExceeded {
		t.Fatalf("dl: %+v", d)
	}
	gs, err := cs.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil || len(gs) != 2 || gs[0].Count != 2 || gs[0].Pattern != "dial tcp <addr>: refused" ||
		gs[0].Sample != "dial tcp 10.1.1.1:80: refused" || gs[1].Count != 1 || gs[0].FirstSeen.After(gs[0].LastSeen) {
		t.Fatalf("groups: %+v %v", gs, err)
	}

	// Retry: one more attempt, the passed deadline dropped, history kept.
	j, err := retryJob(t, s, retryParams{ID: "dl", Actor: "maya"})
	if err != nil || j.State != engine.StateAvailable || j.Deadline != nil || j.MaxAttempts != 3 || j.FinalizedAt != nil ||
		j.TerminalReason != "" || j.Version != d.Version+1 {
		t.Fatalf("retry: %+v %v", j, err)
	}
	a := getJob(t, s, "a")
	newDL := time.Now().Add(time.Hour).Truncate(time.Microsecond) // stores keep microseconds (PostgreSQL)
	j, err = retryJob(t, s, retryParams{ID: "a", Actor: "maya", Deadline: &newDL})
	if err != nil || j.Attempt != a.Attempt || j.MaxAttempts != 3 || len(j.Errors) != 1 || j.Deadline == nil || !j.Deadline.Equal(newDL.UTC()) {
		t.Fatalf("retry with a deadline: %+v %v", j, err)
	}
	ev := events(t, s, "a")
	if last := ev[len(ev)-1]; last.Kind != engine.EventRetried || last.Actor != "maya" || last.From != engine.StateArchived || last.To != engine.StateAvailable {
		t.Fatalf("retry event: %+v", last)
	}
	if _, err := retryJob(t, s, retryParams{ID: "a"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("retry of an available job: %v", err)
	}
	if _, err := retryJob(t, s, retryParams{ID: "nope"}); !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("retry of a missing job: %v", err)
	}

	// Retry with input: new id taken → conflict; superseded → conflict unless forced.
	if _, err := retryWithInput(t, s, withInputParams{ID: "b", NewID: "a", Payload: json.RawMessage(`{}`), Fingerprint: "x"}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("retry with input onto an existing id: %v", err)
	}
	if _, err := retryWithInput(t, s, withInputParams{ID: "a", NewID: "a2", Payload: json.RawMessage(`{}`), Fingerprint: "x"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("retry with input of a waiting job: %v", err)
	}
	meta := getJob(t, s, "b")
	c, err := retryWithInput(t, s, withInputParams{ID: "b", NewID: "b2", Payload: json.RawMessage(`{"fixed":1}`), Fingerprint: "fp-b2", Actor: "maya"})
	if err != nil || c.RetryOf != "b" || c.Queue != "q" || c.Kind != "k" || c.MaxAttempts != meta.MaxAttempts ||
		c.State != engine.StateAvailable || string(c.Payload) != `{"fixed":1}` || c.Fingerprint != "fp-b2" {
		t.Fatalf("copy: %+v %v", c, err)
	}
	if b := getJob(t, s, "b"); b.SupersededBy != "b2" || b.State != engine.StateArchived {
		t.Fatalf("original: %+v", b)
	}
	if _, err := retryJob(t, s, retryParams{ID: "b"}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("retry of a superseded job: %v", err)
	}

	// Payload edits: version checked, refused while running.
	b := getJob(t, s, "b")
	e, err := updatePayload(t, s, payloadParams{ID: "b", Payload: json.RawMessage(`{"v":2}`), Fingerprint: "fp-v2", Version: b.Version, Actor: "maya"})
	if err != nil || string(e.Payload) != `{"v":2}` || e.Fingerprint != "fp-v2" || e.Version != b.Version+1 {
		t.Fatalf("edit: %+v %v", e, err)
	}
	if _, err := updatePayload(t, s, payloadParams{ID: "b", Payload: json.RawMessage(`{}`), Version: b.Version}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("stale edit: %v", err)
	}
	// Quarantined fingerprints refuse retries, and retries with input onto them.
	if _, err := retryJob(t, s, retryParams{ID: "b", Force: true}); err != nil {
		t.Fatal(err)
	}
	run := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 10})
	var rb *engine.Job
	for _, x := range run.Jobs {
		if x.ID == "b" {
			rb = x
		}
	}
	if rb == nil {
		t.Fatalf("b not claimed: %v", ids(run.Jobs))
	}
	if _, err := updatePayload(t, s, payloadParams{ID: "b", Payload: json.RawMessage(`{}`), Version: rb.Version}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("edit of a running job: %v", err)
	}
	if err := deleteJob(t, s, actionParams{ID: "b"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("delete of a running job: %v", err)
	}
	quarantineJob(t, s, rb, "boom")
	if _, err := retryWithInput(t, s, withInputParams{ID: "b", NewID: "b3", Payload: json.RawMessage(`{"v":2}`), Fingerprint: "fp-v2"}); !errors.Is(err, engine.ErrQuarantined) {
		t.Fatalf("retry with input onto a quarantined fingerprint: %v", err)
	}
	if _, err := cancelJob(t, s, actionParams{ID: "b"}); !errors.Is(err, engine.ErrWrongState) {
		t.Fatalf("cancel of a quarantined job: %v", err)
	}
	r, err := releaseJob(t, s, actionParams{ID: "b", Actor: "maya"})
	if err != nil || r.State != engine.StateAvailable || r.CrashAttempt != 0 {
		t.Fatalf("release: %+v %v", r, err)
	}
	// Cancel of a running job clears its lease; the worker's late write is refused.
	var x *engine.Job
	for _, r := range run.Jobs {
		if r.ID != "b" {
			x = r
		}
	}
	cj, err := cancelJob(t, s, actionParams{ID: x.ID, Actor: "maya"})
	if err != nil || cj.State != engine.StateCancelled || cj.Lease != nil || cj.TerminalReason != engine.ReasonCancelled || cj.FinalizedAt == nil {
		t.Fatalf("cancel running: %+v %v", cj, err)
	}
	if out, _ := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{{JobRef: refOf(x)}}, EndProbation: true}); !errors.Is(out[0], engine.ErrLeaseLost) {
		t.Fatalf("late completion of a cancelled job: %v", out[0])
	}
	if _, err := retryJob(t, s, retryParams{ID: x.ID}); err != nil {
		t.Fatalf("retry of a cancelled job: %v", err)
	}
}

func testCStorePausedQueueNotClaimed(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cs := s
	ctx := context.Background()
	insertRes(t, s, djob("a", "q", "k"), djob("b", "other", "k"))
	if err := cs.QueuePause(ctx, &backend.QueuePauseParams{Queue: "q", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.QueuePause(ctx, &backend.QueuePauseParams{Queue: "empty", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	if res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 5}); len(res.Jobs) != 0 || res.Now.IsZero() {
		t.Fatalf("claimed from a paused queue: %v", ids(res.Jobs))
	}
	if res := claimRaw(t, s, backend.JobClaimParams{Queue: "other", Limit: 5}); len(res.Jobs) != 1 {
		t.Fatalf("other queue: %v", ids(res.Jobs))
	}
	qs, err := cs.QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, q := range qs {
		parts = append(parts, fmt.Sprint(q.Name, " ", q.Paused, " ", q.Counts))
	}
	got := strings.Join(parts, ", ")
	if want := "empty true map[], other false map[running:1], q true map[available:1]"; got != want {
		t.Fatalf("queues %s, want %s", got, want)
	}
	if err := cs.QueueResume(ctx, &backend.QueuePauseParams{Queue: "q", Actor: "maya"}); err != nil {
		t.Fatal(err)
	}
	if res := claimRaw(t, s, backend.JobClaimParams{Queue: "q", Limit: 5}); len(res.Jobs) != 1 {
		t.Fatalf("after resume: %v", ids(res.Jobs))
	}
	if !slices.Contains(capabilities(s), "operations") {
		t.Fatal(capabilities(s))
	}
}
