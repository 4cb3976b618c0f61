package api

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// A Local client is held to the rules of its identity's role, as a token
// of that role would be, whatever tokens the server has.
func TestLocalClientRoles(t *testing.T) {
	t.Parallel()
	fx, srv := setup(t, ServerOptions{Tokens: testTokens})
	before := fx.snapshot(t)
	ctx := context.Background()
	local := func(role engine.Role) *Client {
		return srv.Local(Identity{Name: "ssh-" + string(role), Role: role}, ClientOptions{Retries: -1})
	}

	viewer := local(engine.RoleViewer)
	m, err := viewer.Meta(ctx)
	if err != nil || m.Role != engine.RoleViewer || m.Actor != "ssh-viewer" {
		t.Fatalf("viewer meta %+v, %v", m, err)
	}
	page, err := viewer.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil || len(page.Jobs) == 0 {
		t.Fatalf("viewer list: %v", err)
	}
	for _, j := range page.Jobs {
		if len(j.Metadata) != 0 {
			t.Fatalf("viewer sees metadata of %s", j.ID)
		}
	}
	if _, err := viewer.GetJob(ctx, "JOB_1", true); !errors.Is(err, ErrForbidden) {
		t.Fatalf("viewer payload: %v, want ErrForbidden", err)
	}
	if _, err := viewer.Retry(ctx, "JOB_1", engine.RetryOptions{}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("viewer retry: %v, want ErrForbidden", err)
	}
	if after := fx.snapshot(t); after != before {
		t.Fatalf("a viewer changed something:\n%s\nafter:\n%s", before, after)
	}

	d, err := local(engine.RoleInspector).GetJob(ctx, "JOB_1", true)
	if err != nil || !strings.Contains(string(d.Job.Payload), "s3cr3t") {
		t.Fatalf("inspector payload: %v", err)
	}

	operator := local(engine.RoleOperator)
	if _, err := operator.Retry(ctx, "JOB_1", engine.RetryOptions{}); err != nil {
		t.Fatalf("operator retry: %v", err)
	}
	if got := fx.actors(t, "JOB_1", engine.EventRetried); !slices.Equal(got, []string{"ssh-operator"}) {
		t.Fatalf("JOB_1 retried by %q, want the identity's name", got)
	}
	if err := operator.PauseQueue(ctx, "billing"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("operator pause: %v, want ErrForbidden", err)
	}
	if err := local(engine.RoleAdmin).PauseQueue(ctx, "billing"); err != nil {
		t.Fatalf("admin pause: %v", err)
	}
}

func TestLocalClientReadOnly(t *testing.T) {
	t.Parallel()
	fx, srv := setup(t, ServerOptions{ReadOnly: true})
	before := fx.snapshot(t)
	admin := srv.Local(Identity{Name: "root", Role: engine.RoleAdmin}, ClientOptions{Retries: -1})
	m, err := admin.Meta(context.Background())
	if err != nil || !m.ReadOnly {
		t.Fatalf("meta %+v, %v", m, err)
	}
	if _, err := admin.Retry(context.Background(), "JOB_1", engine.RetryOptions{}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("retry on a read-only server: %v, want ErrForbidden", err)
	}
	if after := fx.snapshot(t); after != before {
		t.Fatalf("a read-only server applied a mutation:\n%s\nafter:\n%s", before, after)
	}
}

// The event stream flows through the pipe as it is written, and ends the
// handler's subscription when the subscriber goes.
func TestLocalClientStreams(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	streams := newCountedStreams(fx.eng)
	srv := NewServer(streams, ServerOptions{Heartbeat: 50 * time.Millisecond})
	c := srv.Local(Identity{Name: "maya", Role: engine.RoleViewer}, ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The server subscribed before it answered: a change made now is
	// heard.
	if _, err := fx.eng.Retry(context.Background(), "JOB_1", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := nextChange(t, ch, 5*time.Second); got.Kind != engine.ChangeJob || got.JobID != "JOB_1" || got.State != engine.StateAvailable {
		t.Fatalf("change %+v", got)
	}
	cancel()
	streams.waitOpen(t, 0)
}
