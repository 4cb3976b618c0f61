package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// Text no store keeps alike: PostgreSQL refuses NUL and invalid UTF-8 in
// text and jsonb where SQLite and Redis would keep them. The engine
// decides for every store (engine/text.go), and these checks hold each
// store to the same answers.

// testUnstorableErrorText: a handler's error holding a NUL and invalid
// UTF-8, and a step's error alike, are recorded as their text with
// U+FFFD for those bytes: the job dies of its error, charged no crash.
// A store that wrote the text as it came would fail the finish on
// PostgreSQL, and the job would stay running until the reaper charged it
// a crash.
func testUnstorableErrorText(t *testing.T, h Harness) {
	s, e, _ := oneKind(t, h, false, func(ctx context.Context, j *engine.Job, _ int) error {
		if j.ID == "step" {
			_, err := engine.Step(ctx, "read", func(context.Context) (int, error) {
				return 0, errors.New("step \x00 read \xff")
			})
			return err
		}
		return errors.New("boom\x00after nul \xff\xfe end")
	})
	enqueue(t, e, engine.EnqueueParams{ID: "nul", Queue: "q", Kind: "k", MaxAttempts: 1})
	enqueue(t, e, engine.EnqueueParams{ID: "step", Queue: "q", Kind: "k", MaxAttempts: 1})
	j := waitState(t, s, "nul", engine.StateArchived)
	if j.Attempt != 1 || j.CrashAttempt != 0 || len(j.Errors) != 1 || j.Errors[0].Crash {
		t.Fatalf("job: %s errors %+v, want one failed attempt and no crash", describe(j), j.Errors)
	}
	if got, want := j.Errors[0].Message, "boom\uFFFDafter nul \uFFFD end"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
	ev := events(t, s, "nul")
	if last := ev[len(ev)-1]; last.Kind != engine.EventArchived || strings.ContainsAny(last.Message, "\x00") {
		t.Fatalf("last event %+v", last)
	}
	sj := waitState(t, s, "step", engine.StateArchived)
	if sj.CrashAttempt != 0 || len(sj.Errors) != 1 || !strings.Contains(sj.Errors[0].Message, "step \uFFFD read \uFFFD") {
		t.Fatalf("step job: %s errors %+v", describe(sj), sj.Errors)
	}
	cp := checkpointOf(t, sj)
	if len(cp.Steps) != 1 || cp.Steps[0].Error != "step \uFFFD read \uFFFD" {
		t.Fatalf("checkpoint steps %+v", cp.Steps)
	}
}

// testUnstorableInput: JSON with a NUL (or invalid UTF-8), and filters,
// cursors and ids with them, are refused or not found alike on every
// store, never a store error; nothing is stored, and a batch stores its
// other jobs.
func testUnstorableInput(t *testing.T, h Harness) {
	s, e, _ := oneKind(t, h, false, func(ctx context.Context, j *engine.Job, _ int) error {
		_, err := engine.Step(ctx, "read", func(context.Context) (string, error) { return "a\x00b", nil })
		return err
	})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		p    engine.EnqueueParams
	}{
		{"NUL in a payload string", engine.EnqueueParams{Payload: json.RawMessage(`{"a":"x\u0000y"}`)}},
		{"NUL in a payload key", engine.EnqueueParams{Payload: json.RawMessage(`{"\u0000":1}`)}},
		{"NUL in metadata", engine.EnqueueParams{Metadata: json.RawMessage(`{"m":"\u0000"}`)}},
		{"invalid UTF-8 in a payload", engine.EnqueueParams{Payload: json.RawMessage("{\"a\":\"\xff\"}")}},
	} {
		c.p.ID, c.p.Queue, c.p.Kind = "bad", "idle", "k"
		if _, err := e.Enqueue(ctx, c.p); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", c.name, err)
		}
		if !gone(s, "bad") {
			t.Fatalf("%s: refused, yet stored", c.name)
		}
	}
	// An escaped backslash before u0000 is text, not a NUL.
	enqueue(t, e, engine.EnqueueParams{ID: "slash", Queue: "idle", Kind: "k", Payload: json.RawMessage(`{"a":"\\u0000"}`)})
	res, err := e.EnqueueMany(ctx, []engine.EnqueueParams{
		{ID: "good-1", Queue: "idle", Kind: "k"},
		{ID: "bad-nul", Queue: "idle", Kind: "k", Payload: json.RawMessage(`{"a":"\u0000"}`)},
		{ID: "good-2", Queue: "idle", Kind: "k"},
	})
	if err != nil || len(res) != 3 || res[0].Err != nil || res[2].Err != nil || !errors.Is(res[1].Err, engine.ErrInvalid) {
		t.Fatalf("batch: %+v %v, want ok, ErrInvalid, ok", res, err)
	}
	getJob(t, s, "good-2")
	if _, err := e.UpdatePayload(ctx, "good-1", json.RawMessage(`{"a":"\u0000"}`), 0); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("UpdatePayload with a NUL: %v, want ErrInvalid", err)
	}
	if _, err := e.Signal(ctx, "good-1", "go", json.RawMessage(`{"a":"\u0000"}`)); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("Signal with a NUL: %v, want ErrInvalid", err)
	}
	for _, id := range []string{"a\x00b", "a\xffb"} {
		if _, err := e.GetJob(ctx, id, true); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("GetJob(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := e.Retry(ctx, id, engine.RetryOptions{}); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("Retry(%q): %v, want ErrNotFound", id, err)
		}
		if err := e.Delete(ctx, id); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("Delete(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := e.Operation(ctx, id); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("Operation(%q): %v, want ErrNotFound", id, err)
		}
		if _, err := e.ReleaseFingerprint(ctx, id); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("ReleaseFingerprint(%q): %v, want ErrNotFound", id, err)
		}
		rs, err := e.Apply(ctx, engine.ActionRetry, []string{id, "good-2"})
		if err != nil || len(rs) != 2 || rs[0].Reason != engine.ReasonCode(engine.ErrNotFound) {
			t.Fatalf("Apply(%q): %+v %v, want not found", id, rs, err)
		}
	}
	for _, f := range []engine.Filter{
		{States: []engine.State{engine.StateArchived}, Error: "x\x00y"},
		{IDs: []string{"a\x00b"}},
		{IDs: []string{"a\xffb"}},
		{Payload: []engine.PathMatch{{Path: "a", Value: "\x00"}}},
		{Meta: []engine.PathMatch{{Path: "a", Value: "\xff"}}},
	} {
		if _, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: f}); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("ListJobs(%+v): %v, want ErrInvalid", f, err)
		}
		if _, err := e.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: f, DryRun: true}); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("Bulk dry run (%+v): %v, want ErrInvalid", f, err)
		}
	}
	// A step whose result holds a NUL fails as its own error would.
	enqueue(t, e, engine.EnqueueParams{ID: "result", Queue: "q", Kind: "k", MaxAttempts: 1})
	j := waitState(t, s, "result", engine.StateArchived)
	if j.CrashAttempt != 0 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Message, "NUL") {
		t.Fatalf("step with a NUL result: %s errors %+v", describe(j), j.Errors)
	}
}
