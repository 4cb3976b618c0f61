package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// TestJobsRetryNamesUniqueHolder: sluice jobs retry of a cancelled unique
// job whose key a live job took since fails, naming the live job, one id
// or several; sluice bulk retry --dry-run says how many of those it
// matched and names a holder.
func TestJobsRetryNamesUniqueHolder(t *testing.T) {
	path := sqlitetest.Path(t)
	ctx := engine.WithActor(context.Background(), "maya")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(s, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	u := &engine.UniqueOpts{ByPayload: true}
	payload := json.RawMessage(`{"customer":3}`)
	for _, id := range []string{"uq-dead", "plain"} {
		p := engine.EnqueueParams{ID: id, Queue: "billing", Kind: "charge", Payload: payload}
		if id == "uq-dead" {
			p.Unique = u
		}
		if _, err := e.Enqueue(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "uq-live", Queue: "billing", Kind: "charge", Payload: payload, Unique: u, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "sqlite://"+path)
	t.Setenv("SLUICE_ACTOR", "maya")

	code, out, stderr := runCLI(t, "", "jobs", "show", "uq-live")
	if code != 0 || !strings.Contains(out, "unique key") {
		t.Fatalf("jobs show uq-live: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "jobs", "retry", "uq-dead")
	if code != 1 || !strings.Contains(out+stderr, "live job uq-live holds its unique key") {
		t.Fatalf("jobs retry uq-dead: exit %d\n%s\n%s", code, out, stderr)
	}
	// The bulk dry run counts the held jobs among every matched one.
	code, out, stderr = runCLI(t, "", "bulk", "retry", "--state", "cancelled", "--queue", "billing", "--dry-run")
	if code != 0 || !strings.Contains(out, "unique keys: 1 of 2 matched are held by a live job, e.g. uq-live; they will be refused") {
		t.Fatalf("bulk retry --dry-run: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "jobs", "retry", "uq-dead", "plain")
	if code != 1 || !strings.Contains(out, "unique_held") || !strings.Contains(out, "live job uq-live") || !strings.Contains(stderr, "1 of 2 failed") {
		t.Fatalf("jobs retry uq-dead plain: exit %d\n%s\n%s", code, out, stderr)
	}
}
