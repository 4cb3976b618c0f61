package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/engine"
)

// TestUniqueOverHTTP: POST /jobs carries the unique options both ways
// (a duplicate answers the holder, existing), refuses bad ones naming
// them, and a refused retry's answer names the live job.
func TestUniqueOverHTTP(t *testing.T) {
	e := workingEngine(t, "billing", "charge", func(context.Context, *engine.Job) error {
		return errors.New("card declined")
	})
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{}))
	t.Cleanup(hs.Close)
	c := api.NewClient(hs.URL, "", api.ClientOptions{Timeout: 5 * time.Second, RetryBackoff: time.Millisecond})
	ctx := engine.WithActor(context.Background(), "maya")

	u := &engine.UniqueOpts{ByPayload: true}
	payload := json.RawMessage(`{"customer":7}`)
	res, err := c.EnqueueMany(ctx, []engine.EnqueueParams{
		{ID: "dead", Queue: "billing", Kind: "charge", MaxAttempts: 1, Payload: payload, Unique: u},
		{ID: "dup", Queue: "billing", Kind: "charge", MaxAttempts: 1, Payload: payload, Unique: u},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Existing || res[0].Job.UniqueKey == "" {
		t.Fatalf("first: %+v", res[0])
	}
	if res[1].Err != nil || !res[1].Existing || res[1].Job.ID != "dead" {
		t.Fatalf("duplicate: %+v, want dead, existing", res[1])
	}
	for _, bad := range []struct {
		u    engine.UniqueOpts
		want string
	}{
		{engine.UniqueOpts{Fields: []string{"region"}}, `"region"`},
		{engine.UniqueOpts{Period: 1500 * time.Millisecond}, "whole number of seconds"},
	} {
		_, err = c.Enqueue(ctx, engine.EnqueueParams{ID: "bad", Queue: "billing", Kind: "charge", Payload: payload, Unique: &bad.u})
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%+v: %v, want ErrInvalid naming %s", bad.u, err, bad.want)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		j, err := c.GetJob(ctx, "dead", false)
		if err != nil {
			t.Fatal(err)
		}
		if j.Job.State == engine.StateArchived {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead never died: %s", j.Job.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Enqueue(ctx, engine.EnqueueParams{ID: "live", Queue: "billing", Kind: "charge", Payload: payload, Unique: u, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Retry(ctx, "dead", engine.RetryOptions{}); !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "live job live") {
		t.Fatalf("retry of dead: %v, want a conflict naming live", err)
	}
	ar, err := c.Apply(ctx, engine.ActionRetry, []string{"dead"})
	if err != nil || len(ar) != 1 || ar[0].OK || ar[0].Reason != "unique_held" || !strings.Contains(ar[0].Error, "live job live") {
		t.Fatalf("apply: %+v %v", ar, err)
	}
}
