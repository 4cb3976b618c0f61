package engine_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// The audit trail: every operator action through Control leaves one
// record, written in the action's own transaction, naming who (the actor
// and the origin a server or a program gives its context), what, when
// and the result; a refused action leaves its own. Audit reads it back,
// filtered by a query in the language of sluice audit list.
func ExampleEngine_Audit() {
	store, closeStore := exampleStore(context.Background()) // a SQLite file in a temporary directory
	defer closeStore()
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		log.Fatal(err)
	}
	ctx := engine.WithOrigin(engine.WithActor(context.Background(), "maya"),
		engine.Origin{Role: engine.RoleOperator, Surface: engine.SurfaceCLI, Source: "10.0.0.7:51234"})
	if err := e.PauseQueue(ctx, "billing"); err != nil {
		log.Fatal(err)
	}
	if _, err := e.Retry(ctx, "no-such-job", engine.RetryOptions{}); err == nil {
		log.Fatal("a retry of no job succeeded")
	}

	q, err := engine.ParseAuditQuery("actor:maya since:1h", time.Now())
	if err != nil {
		log.Fatal(err)
	}
	page, err := e.Audit(ctx, q)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range page.Records { // newest first
		fmt.Println(r.Actor, r.Role, r.Surface, r.Action, r.JobID+r.Target, r.Result)
	}
	// Output:
	// maya operator cli retry no-such-job not_found
	// maya operator cli pause billing ok
}
