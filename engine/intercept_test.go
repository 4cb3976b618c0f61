package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// recorder is an engine.Interceptor that writes down what it is let in on.
type recorder struct {
	mu       sync.Mutex
	attempts []engine.AttemptInfo
	results  chan engine.AttemptResult
	steps    []string
	actions  []engine.ActionInfo
	actErrs  []error
}

type ctxMark struct{}

func (r *recorder) InterceptEnqueue(ctx context.Context, jobs []engine.EnqueueParams, next engine.EnqueueFunc) ([]engine.EnqueueResult, error) {
	for i := range jobs {
		jobs[i].Metadata = json.RawMessage(`{"mark":"enqueued"}`)
	}
	return next(ctx, jobs)
}

func (r *recorder) InterceptAttempt(ctx context.Context, a engine.AttemptInfo) (context.Context, engine.AttemptHook) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
	return context.WithValue(ctx, ctxMark{}, "attempt"), engine.AttemptHook{
		Ref:  fmt.Sprintf("ref-%d", a.Run),
		Done: func(res engine.AttemptResult) { r.results <- res },
	}
}

func (r *recorder) InterceptStep(ctx context.Context, s engine.StepInfo) (context.Context, func(error)) {
	return ctx, func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.steps = append(r.steps, fmt.Sprintf("%d:%s replayed=%v err=%v", s.Position, s.Name, s.Replayed, err != nil))
	}
}

func (r *recorder) InterceptAction(ctx context.Context, a engine.ActionInfo) (context.Context, func(error)) {
	return ctx, func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.actions = append(r.actions, a)
		r.actErrs = append(r.actErrs, err)
	}
}

// TestInterceptorSeesEnqueueAttemptsStepsAndActions: an Interceptor adds
// metadata at enqueue, wraps the handler's context, learns each attempt's
// outcome (a failed step's death, then success), is asked for a Ref that
// the error entry keeps and the retried run is handed back as Previous,
// sees each step (replayed or run) and the operator's retry with its
// actor.
func TestInterceptorSeesEnqueueAttemptsStepsAndActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &recorder{results: make(chan engine.AttemptResult, 10)}
	e, err := engine.New(sqlitetest.New(t), engine.Config{
		Queues:        map[string]engine.QueueConfig{"q": {Concurrency: 1}},
		PollInterval:  10 * time.Millisecond,
		NoMaintenance: true,
		Interceptor:   rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	var runs int
	var marks []any
	if err := e.Register(engine.Kind{Name: "flow", MaxAttempts: 1, Handler: func(ctx context.Context, j *engine.Job) error {
		runs++
		marks = append(marks, ctx.Value(ctxMark{}))
		if _, err := engine.Step(ctx, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		_, err := engine.Step(ctx, "b", func(context.Context) (int, error) {
			if runs == 1 {
				return 0, errors.New("card service down")
			}
			return 2, nil
		})
		return err
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop(ctx) }()
	j, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "j1", Queue: "q", Kind: "flow"})
	if err != nil {
		t.Fatal(err)
	}
	if string(j.Metadata) != `{"mark":"enqueued"}` {
		t.Errorf("metadata written = %s, want the interceptor's", j.Metadata)
	}
	first := waitResult(t, rec.results)
	if first.Outcome != "error" || !first.Dead || first.State != engine.StateArchived || first.Err == nil || first.Err.Error() != "card service down" {
		t.Fatalf("first attempt ended %+v, want a death by error", first)
	}
	d, err := e.GetJob(ctx, "j1", false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Job.Errors); n != 1 || d.Job.Errors[0].Ref != "ref-1" {
		t.Fatalf("error entries %+v, want one with Ref ref-1", d.Job.Errors)
	}
	// The dead job's error group resolved, through the Interceptor too.
	gs, err := e.ErrorGroups(ctx, engine.Filter{})
	if err != nil || len(gs) != 1 {
		t.Fatalf("error groups %+v %v, want j1's", gs, err)
	}
	if _, err := e.ResolveErrorGroup(engine.WithActor(ctx, "alice"), engine.ErrorGroupResolveParams{ID: gs[0].ID, Note: "fixed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Retry(engine.WithActor(ctx, "alice"), "j1", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitResult(t, rec.results)
	if second.Outcome != "success" || second.Dead || second.State != engine.StateCompleted || second.Err != nil {
		t.Fatalf("second attempt ended %+v, want a success", second)
	}
	bob := engine.WithActor(ctx, "bob")
	if err := e.PauseQueue(bob, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Bulk(bob, engine.BulkParams{Action: engine.ActionRetry, DryRun: true,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Retry(bob, "nope", engine.RetryOptions{}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("retry of a job that is not there: %v, want ErrNotFound", err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.attempts) != 2 || rec.attempts[0].Previous != "" || rec.attempts[1].Previous != "ref-1" || rec.attempts[0].Job.ID != "j1" {
		t.Errorf("attempts %+v, want the retried run to be handed ref-1", rec.attempts)
	}
	if fmt.Sprint(marks) != "[attempt attempt]" {
		t.Errorf("handler contexts carried %v, want the interceptor's each time", marks)
	}
	wantSteps := "[1:a replayed=false err=false 2:b replayed=false err=true 1:a replayed=true err=false 2:b replayed=false err=false]"
	if got := fmt.Sprint(rec.steps); got != wantSteps {
		t.Errorf("steps %s, want %s", got, wantSteps)
	}
	var acts []string
	for i, a := range rec.actions {
		acts = append(acts, fmt.Sprintf("%s %s by %s job=%s queue=%s selector=%q dry=%v err=%v",
			a.Name, a.Action, a.Actor, a.JobID, a.Queue, a.Selector, a.DryRun, rec.actErrs[i] != nil))
	}
	wantActs := []string{
		"resolve_error_group  by alice job= queue= selector=\"\" dry=false err=false",
		"retry  by alice job=j1 queue= selector=\"\" dry=false err=false",
		"pause  by bob job= queue=q selector=\"\" dry=false err=false",
		"bulk retry by bob job= queue= selector=\"state:archived\" dry=true err=false",
		"retry  by bob job=nope queue= selector=\"\" dry=false err=true",
	}
	if fmt.Sprint(acts) != fmt.Sprint(wantActs) {
		t.Errorf("actions\n%s\nwant\n%s", strings.Join(acts, "\n"), strings.Join(wantActs, "\n"))
	}
	if len(rec.actions) > 0 && rec.actions[0].ErrorGroup != gs[0].ID {
		t.Errorf("the resolution names error group %q, want %q", rec.actions[0].ErrorGroup, gs[0].ID)
	}
}

func waitResult(t *testing.T, ch <-chan engine.AttemptResult) engine.AttemptResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no attempt ended")
		return engine.AttemptResult{}
	}
}
