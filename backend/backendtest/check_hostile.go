package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/outage"
)

// Hostile input: a value, a row or a query that one caller makes must
// never cost the others. These checks run through Control, so over the
// HTTP client they hold the API to the same answers.

// nested is a JSON object depth levels deep: {"a":{"a":...{"a":1}}}.
func nested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
}

// testControlNestingLimit: a value one level past engine.MaxJSONDepth is
// refused with ErrInvalid at every entry point (enqueue's payload and
// metadata, payload edit, retry with input, a replay's result, a
// signal) and nothing changes; a value at the limit is taken.
func testControlNestingLimit(t *testing.T, h Harness) {
	s := h.NewStore(t)
	e := startEngine(t, s, fast("nest-worker", "wf"), engine.Kind{Name: "wf2", MaxAttempts: 1, Handler: func(ctx context.Context, j *engine.Job) error {
		for n := 1; n <= 2; n++ {
			if _, err := engine.Step(ctx, fmt.Sprintf("s%d", n), func(context.Context) (int, error) { return n, nil }); err != nil {
				return err
			}
		}
		return errors.New("after step 2")
	}})
	ctl := h.control(t, e)
	enq, ok := ctl.(interface {
		Enqueue(context.Context, engine.EnqueueParams) (*engine.Job, error)
	})
	if !ok {
		t.Fatalf("%T cannot enqueue", ctl)
	}
	ctx := engine.WithActor(context.Background(), "maya")
	deep, atLimit := nested(engine.MaxJSONDepth+1), nested(engine.MaxJSONDepth)
	if got := engine.JSONDepth(deep); got != engine.MaxJSONDepth+1 {
		t.Fatalf("JSONDepth(deep) = %d", got)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprint(engine.MaxJSONDepth)) {
			t.Fatalf("%s %d deep: %v, want ErrInvalid naming the limit %d", what, engine.MaxJSONDepth+1, err, engine.MaxJSONDepth)
		}
	}

	_, err := enq.Enqueue(ctx, engine.EnqueueParams{ID: "deep", Queue: "idle", Kind: "k", Payload: deep})
	refused("enqueue payload", err)
	_, err = enq.Enqueue(ctx, engine.EnqueueParams{ID: "deep", Queue: "idle", Kind: "k", Metadata: deep})
	refused("enqueue metadata", err)
	if !gone(s, "deep") {
		t.Fatal("a refused job was stored")
	}
	if _, err := enq.Enqueue(ctx, engine.EnqueueParams{ID: "limit", Queue: "idle", Kind: "k", Payload: atLimit, Metadata: atLimit}); err != nil {
		t.Fatalf("enqueue at the limit: %v", err)
	}
	j, err := ctl.UpdatePayload(ctx, "limit", deep, 0)
	refused("payload edit", err)
	if j != nil || string(getJob(t, s, "limit").Payload) != string(atLimit) {
		t.Fatal("a refused payload edit changed the payload")
	}

	enqueue(t, e, engine.EnqueueParams{ID: "w", Queue: "wf", Kind: "wf2"})
	waitState(t, s, "w", engine.StateArchived)
	_, err = ctl.RetryWithInput(ctx, "w", engine.RetryWithInputParams{ID: "w-input", Payload: deep})
	refused("retry with input", err)
	_, err = ctl.ReplayFromStep(ctx, "w", engine.ReplayParams{Step: 2, ID: "w-replay", Result: deep})
	refused("replay result", err)
	_, err = ctl.Signal(ctx, "limit", "go", deep)
	refused("signal", err)
	for _, id := range []string{"w-input", "w-replay"} {
		if !gone(s, id) {
			t.Fatalf("%s was stored after a refusal", id)
		}
	}
	if _, err := ctl.ReplayFromStep(ctx, "w", engine.ReplayParams{Step: 2, ID: "w-replay", Result: atLimit}); err != nil {
		t.Fatalf("replay with a result at the limit: %v", err)
	}
}

// testControlDeepRowListed: a row whose payload and metadata nest past
// what a store's JSON functions read (written straight to the store, as
// by a version without the limit) breaks no listing: the plain list, a
// payload or meta filter and the counts answer, and the row can be read.
func testControlDeepRowListed(t *testing.T, h Harness) {
	s := h.NewStore(t)
	deepJob := djob("deep", "q", "k")
	deepJob.Payload, deepJob.Metadata = nested(1100), nested(1100)
	flat := djob("flat", "q", "k")
	flat.Payload, flat.Metadata = json.RawMessage(`{"a":"x"}`), json.RawMessage(`{"a":"x"}`)
	insertRes(t, s, deepJob, flat)
	e := newEngine(t, s, engine.Config{NoMaintenance: true})
	ctl := h.control(t, e)
	ctx := context.Background()
	ids := func(p *engine.JobPage) []string {
		var out []string
		for _, j := range p.Jobs {
			out = append(out, j.ID)
		}
		slices.Sort(out)
		return out
	}
	all := engine.Filter{States: engine.AllStates}
	page, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: all})
	if err != nil {
		t.Fatalf("plain list with a deep row: %v", err)
	}
	if got := ids(page); !slices.Equal(got, []string{"deep", "flat"}) {
		t.Fatalf("plain list: %v", got)
	}
	for _, f := range []engine.Filter{
		{States: engine.AllStates, Payload: []engine.PathMatch{{Path: "a", Value: "x"}}},
		{States: engine.AllStates, Meta: []engine.PathMatch{{Path: "a", Value: "x"}}},
	} {
		page, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: f})
		if err != nil {
			t.Fatalf("list %s with a deep row: %v", f, err)
		}
		if got := ids(page); !slices.Equal(got, []string{"flat"}) {
			t.Fatalf("list %s: %v, want flat", f, got)
		}
		if _, err := ctl.CountJobs(ctx, engine.CountJobsParams{Filter: f}); err != nil {
			t.Fatalf("count %s with a deep row: %v", f, err)
		}
	}
	d, err := ctl.GetJob(ctx, "deep", true)
	if err != nil {
		t.Fatalf("get the deep row: %v", err)
	}
	if engine.JSONDepth(d.Job.Payload) != 1100 {
		t.Fatalf("deep row's payload came back %d deep", engine.JSONDepth(d.Job.Payload))
	}
}

// testControlFilterBounds: a filter past the documented bounds is refused
// with ErrInvalid on every store, never answered as the store being
// unreachable; one at the bounds answers.
func testControlFilterBounds(t *testing.T, h Harness) {
	s := h.NewStore(t)
	insertRes(t, s, djob("a", "q", "k"))
	e := newEngine(t, s, engine.Config{NoMaintenance: true})
	ctl := h.control(t, e)
	ctx := context.Background()
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("q%05d", i)
		}
		return out
	}
	paths := func(n int) []engine.PathMatch {
		out := make([]engine.PathMatch, n)
		for i := range out {
			out[i] = engine.PathMatch{Path: fmt.Sprintf("k%d", i), Value: "v"}
		}
		return out
	}
	long := strings.Repeat("x", engine.MaxFilterText+1)
	for name, f := range map[string]engine.Filter{
		"queues":         {Queues: names(20000)},
		"kinds":          {Kinds: names(engine.MaxFilterValues + 1)},
		"tags":           {Tags: names(engine.MaxFilterValues + 1)},
		"payload terms":  {Payload: paths(3000)},
		"meta terms":     {Meta: paths(engine.MaxFilterPaths + 1)},
		"error text":     {Error: long},
		"payload value":  {Payload: []engine.PathMatch{{Path: "a", Value: long}}},
		"both path sets": {Payload: paths(engine.MaxFilterPaths/2 + 1), Meta: paths(engine.MaxFilterPaths / 2)},
	} {
		f.States = engine.AllStates
		_, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: f})
		if !errors.Is(err, engine.ErrInvalid) || outage.StoreUnavailable(err) {
			t.Fatalf("list with too many %s: %v, want ErrInvalid", name, err)
		}
		if _, err := ctl.CountJobs(ctx, engine.CountJobsParams{Filter: f}); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("count with too many %s: %v, want ErrInvalid", name, err)
		}
		if _, err := ctl.Bulk(ctx, engine.BulkParams{Action: engine.ActionRetry, Selector: f, DryRun: true}); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("bulk dry run with too many %s: %v, want ErrInvalid", name, err)
		}
	}
	at := engine.Filter{States: engine.AllStates, Queues: append(names(engine.MaxFilterValues-1), "q"),
		Payload: append(paths(engine.MaxFilterPaths-1), engine.PathMatch{Path: "n", Value: "a"})}
	if _, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: at}); err != nil {
		t.Fatalf("list at the bounds: %v", err)
	}
	if _, err := ctl.CountJobs(ctx, engine.CountJobsParams{Filter: at}); err != nil {
		t.Fatalf("count at the bounds: %v", err)
	}
}

// testCStoreOversizedFilterNoOutage: a filter far past the engine's
// bounds, handed to the store directly (as a caller that skipped
// Validate would), is answered or refused with ErrInvalid; the store's
// refusal of a statement it built is never an error that reads as the
// store being unreachable.
func testCStoreOversizedFilterNoOutage(t *testing.T, h Harness) {
	s := h.NewStore(t)
	insertRes(t, s, djob("a", "q", "k"))
	cs := s
	f := engine.Filter{States: engine.AllStates}
	for i := range 1500 {
		f.Payload = append(f.Payload, engine.PathMatch{Path: fmt.Sprintf("k%d", i), Value: "v"})
	}
	ctx := context.Background()
	_, err := cs.JobListPage(ctx, &backend.JobListPageParams{Filter: f, Limit: 10})
	if err != nil && (!errors.Is(err, engine.ErrInvalid) || outage.StoreUnavailable(err)) {
		t.Fatalf("list with 1500 payload terms: %v, want an answer or ErrInvalid", err)
	}
	_, _, err = cs.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: f, Max: 100})
	if err != nil && (!errors.Is(err, engine.ErrInvalid) || outage.StoreUnavailable(err)) {
		t.Fatalf("count with 1500 payload terms: %v, want an answer or ErrInvalid", err)
	}
}
