package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// runUniqueEnqueue is `testworker unique-enqueue`: goroutines of this
// process enqueue the same unique job, round after round, each round
// starting at a time every process of the test was given (--at plus
// --every a round), so that the processes' goroutines race for each key.
// Each answer is one line on stdout: "ROUND ID new|existing".
// TestFaultUniqueTwoProcesses (cli) runs two of them.
func runUniqueEnqueue(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("unique-enqueue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeURL := fs.String("store", "", "store URL")
	name := fs.String("name", "p", "this process's name, in its jobs' ids")
	goroutines := fs.Int("goroutines", 8, "goroutines enqueueing at once")
	rounds := fs.Int("rounds", 10, "rounds, one unique key each")
	at := fs.Int64("at", 0, "unix nanoseconds the first round starts at")
	every := fs.Duration("every", 100*time.Millisecond, "time between rounds' starts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx := context.Background()
	store, err := storeurl.Open(ctx, *storeURL, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer store.Close()
	e, err := engine.New(store, engine.Config{})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var mu sync.Mutex
	failed := false
	for r := range *rounds {
		time.Sleep(time.Until(time.Unix(0, *at).Add(time.Duration(r) * *every)))
		var wg sync.WaitGroup
		for g := range *goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.EnqueueMany(ctx, []engine.EnqueueParams{{
					ID: fmt.Sprintf("r%d-%s-g%d", r, *name, g), Queue: "unique", Kind: "unique.race",
					Payload: json.RawMessage(fmt.Sprintf(`{"round":%d}`, r)),
					Unique:  &engine.UniqueOpts{ByPayload: true},
				}})
				if err == nil {
					err = res[0].Err
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					fmt.Fprintf(stderr, "round %d goroutine %d: %v\n", r, g, err)
					failed = true
					return
				}
				how := "new"
				if res[0].Existing {
					how = "existing"
				}
				fmt.Fprintf(stdout, "%d %s %s\n", r, res[0].Job.ID, how)
			}()
		}
		wg.Wait()
	}
	if failed {
		return 1
	}
	return 0
}
