package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
)

// TestHiddenErrorsHideNearSingletons: on a server that hides error text
// from viewers, a viewer's error groups carry no near-singleton count
// (it says which hidden texts differ in one word); an inspector's do.
func TestHiddenErrorsHideNearSingletons(t *testing.T) {
	e := workingEngine(t, "misc", "call", func(_ context.Context, j *engine.Job) error {
		var a struct{ Word string }
		if err := json.Unmarshal(j.Payload, &a); err != nil {
			return err
		}
		return errors.New("partner refused batch " + a.Word)
	})
	ctx := context.Background()

	// Three deaths of one group (numbers) and two groups of one beside it.
	var ps []engine.EnqueueParams
	for i, w := range []string{"1", "2", "3", "kxqzmw", "pltrvq"} {
		ps = append(ps, engine.EnqueueParams{ID: fmt.Sprintf("J%d", i), Queue: "misc", Kind: "call", MaxAttempts: 1, Args: map[string]string{"word": w}})
	}
	if _, err := e.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := e.CountJobs(ctx, engine.CountJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}})
		if err != nil {
			t.Fatal(err)
		}
		if n.States[engine.StateArchived] == int64(len(ps)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs dead", n.States[engine.StateArchived], len(ps))
		}
		time.Sleep(50 * time.Millisecond)
	}

	const viewer, inspector = "viewer-token-near-00001", "inspector-token-near-001"
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{
		Tokens: map[string]api.Identity{
			viewer:    {Name: "vera", Role: engine.RoleViewer},
			inspector: {Name: "ines", Role: engine.RoleInspector},
		},
		HideErrorsFromViewers: true,
	}))
	t.Cleanup(hs.Close)
	near := func(token string) (sum int) {
		t.Helper()
		r, err := http.NewRequest("GET", hs.URL+"/api/v1/error-groups?q=state:archived", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Groups []engine.ErrorGroup }
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", token, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if len(out.Groups) != 3 {
			t.Fatalf("%s: %d groups, want 3: %+v", token, len(out.Groups), out.Groups)
		}
		for _, g := range out.Groups {
			sum += g.NearSingletons
		}
		return sum
	}
	if n := near(inspector); n == 0 {
		t.Fatal("the inspector's groups count no near singletons: the test shows nothing")
	}
	if n := near(viewer); n != 0 {
		t.Fatalf("a viewer who may not read error text gets %d near singletons", n)
	}
}
