package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// Declare periodic jobs: a nightly report at 02:30 in Berlin, and a
// heartbeat every half second. Every process that declares the same
// schedules fires them; each tick is enqueued once, as the job
// sched:<name>:<tick in Unix ms>, carrying the schedule and tick in its
// metadata. A malformed schedule is refused with what is wrong.
func ExampleEngine_AddPeriodic() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "jobs.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range []engine.Periodic{
		{Name: "nightly-report", Cron: "30 2 * * *", Zone: "Europe/Berlin",
			Missed: engine.MissedRunOnce, Overlap: engine.OverlapSkip,
			Job: engine.EnqueueParams{Queue: "reports", Kind: "report.nightly"}},
		{Name: "heartbeat", Every: 500 * time.Millisecond, AllowSubSecond: true,
			Job: engine.EnqueueParams{Queue: "ops", Kind: "heartbeat", Args: map[string]string{"from": "example"}}},
	} {
		if err := e.AddPeriodic(p); err != nil {
			log.Fatal(err)
		}
	}
	err = e.AddPeriodic(engine.Periodic{Name: "broken", Cron: "61 * * * *", Job: engine.EnqueueParams{Kind: "x"}})
	fmt.Println(err)

	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)

	// The heartbeat's first job.
	f, err := engine.ParseQuery(engine.ScheduleJobsQuery("heartbeat"))
	if err != nil {
		log.Fatal(err)
	}
	var job *engine.Job
	for deadline := time.Now().Add(time.Minute); job == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: f, Limit: 1})
		if err != nil {
			log.Fatal(err)
		}
		if len(page.Jobs) > 0 {
			job = page.Jobs[0]
		}
	}
	d, err := e.GetJob(ctx, job.ID, true)
	if err != nil {
		log.Fatal(err)
	}
	var meta struct {
		Sluice struct{ Schedule string } `json:"sluice"`
	}
	if err := json.Unmarshal(d.Job.Metadata, &meta); err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.HasPrefix(job.ID, "sched:heartbeat:"), meta.Sluice.Schedule, string(d.Job.Payload))

	// What an operator sees (engine.Control, the console, the CLI).
	page, err := e.Schedules(ctx, 0, "")
	if err != nil {
		log.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range page.Schedules {
		if s.Name == "nightly-report" {
			fmt.Println(s.Name, s.Spec, s.Zone, "next at", s.Next[0].In(berlin).Format("15:04"))
		}
	}
	// Output:
	// invalid input: schedule "broken": cron "61 * * * *": end of range (61) above maximum (59): 61
	// true heartbeat {"from":"example"}
	// nightly-report 30 2 * * * Europe/Berlin next at 02:30
}
