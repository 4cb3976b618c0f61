package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestCountJobs: the counts of a filter the maintained counters cannot
// answer (a payload path), per state, equal what ListJobs lists under it,
// through the engine and through api.Client alike; past the bound a state
// is marked capped.
func TestCountJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := engine.New(sqlitetest.New(t), engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	var ps []engine.EnqueueParams
	for i := range 12 {
		tier := "gold"
		if i%3 == 0 {
			tier = "silver"
		}
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("J%02d", i), Queue: "billing", Kind: "charge",
			Args: map[string]any{"tier": tier, "n": i}})
	}
	if _, err := e.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"J01", "J02", "J03", "J04"} { // three gold, one silver
		if _, err := e.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{}))
	t.Cleanup(hs.Close)
	client := api.NewClient(hs.URL, "", api.ClientOptions{})
	gold, err := engine.ParseQuery(`payload.tier:gold`)
	if err != nil {
		t.Fatal(err)
	}
	listed := func(s engine.State) int64 {
		f := gold
		f.States = []engine.State{s}
		page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: f, Limit: engine.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(page.Jobs))
	}
	for _, c := range []struct {
		name string
		ctl  engine.Control
	}{{"engine", e}, {"api.Client", client}} {
		got, err := c.ctl.CountJobs(ctx, engine.CountJobsParams{Filter: gold})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.States[engine.StateAvailable] != 5 || got.States[engine.StateCancelled] != 3 || len(got.Capped) != 0 {
			t.Errorf("%s: counts %+v, want 5 available and 3 cancelled, none capped", c.name, got)
		}
		for _, s := range engine.AllStates {
			if n, ok := got.States[s]; !ok || n != listed(s) {
				t.Errorf("%s: %s counts %d (present %v); the list shows %d", c.name, s, n, ok, listed(s))
			}
		}
		capped, err := c.ctl.CountJobs(ctx, engine.CountJobsParams{Filter: gold, Max: 4})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if capped.States[engine.StateAvailable] != 4 || !capped.IsCapped(engine.StateAvailable) || capped.IsCapped(engine.StateCancelled) || capped.Max != 4 {
			t.Errorf("%s: counts to 4 %+v, want available capped at 4, cancelled exact", c.name, capped)
		}
		one := gold
		one.States = []engine.State{engine.StateCancelled}
		only, err := c.ctl.CountJobs(ctx, engine.CountJobsParams{Filter: one})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if want := map[engine.State]int64{engine.StateCancelled: 3}; !reflect.DeepEqual(only.States, want) {
			t.Errorf("%s: counts of one state %+v, want %v", c.name, only.States, want)
		}
		if _, err := c.ctl.CountJobs(ctx, engine.CountJobsParams{Filter: gold, Max: engine.MaxCountJobsMax + 1}); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: a bound past the most: %v, want ErrInvalid", c.name, err)
		}
	}

	// A viewer may count, but not by payload: the count would probe it.
	vs := httptest.NewServer(api.NewServer(e, api.ServerOptions{Tokens: map[string]api.Identity{
		"view-token-0123456789": {Name: "sam", Role: engine.RoleViewer}}}))
	t.Cleanup(vs.Close)
	viewer := api.NewClient(vs.URL, "view-token-0123456789", api.ClientOptions{})
	if _, err := viewer.CountJobs(ctx, engine.CountJobsParams{Filter: gold}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a viewer counting by payload: %v, want ErrForbidden", err)
	}
	byKind := engine.Filter{Kinds: []string{"charge"}}
	if got, err := viewer.CountJobs(ctx, engine.CountJobsParams{Filter: byKind}); err != nil || got.States[engine.StateCancelled] != 4 {
		t.Errorf("a viewer counting by kind: %+v, %v; want 4 cancelled", got, err)
	}
}
