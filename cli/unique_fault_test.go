package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/storeurl"
)

// TestFaultUniqueTwoProcesses: two real processes, 8 goroutines each,
// enqueue the same unique job at the same instant, round after round, on
// one store (a shared SQLite file, a PostgreSQL schema, directly and
// through PgBouncer, a Redis namespace). Every round writes exactly one
// job: of the 16 answers one is new, the other 15 name that same job as
// existing, and the store lists one job of the round's key. It runs with
// the process fault tests, whose child binary (internal/testworker) it
// uses.
func TestFaultUniqueTwoProcesses(t *testing.T) {
	skipUnlessFault(t)
	bin := testWorkerBinary(t)
	const procs, goroutines, rounds = 2, 8, 12
	for _, sc := range append(storeCases(), redisStoreCase()) {
		t.Run(sc.name, func(t *testing.T) {
			url := sc.url(t)
			ctx := context.Background()
			// Create and migrate the store before the children open it.
			s, err := storeurl.OpenMigrating(ctx, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			e, err := engine.New(s, engine.Config{})
			if err != nil {
				t.Fatal(err)
			}
			// The children start the rounds at the same instant, far
			// enough ahead for both to have opened the store.
			at := time.Now().Add(3 * time.Second).UnixNano()
			outs := make([]bytes.Buffer, procs)
			errs := make([]bytes.Buffer, procs)
			var wg sync.WaitGroup
			runErr := make([]error, procs)
			for p := range procs {
				cmd := exec.Command(bin, "unique-enqueue", "--store", url, "--name", fmt.Sprintf("p%d", p),
					"--goroutines", fmt.Sprint(goroutines), "--rounds", fmt.Sprint(rounds),
					"--at", fmt.Sprint(at), "--every", "150ms")
				cmd.Stdout, cmd.Stderr = &outs[p], &errs[p]
				wg.Add(1)
				go func() {
					defer wg.Done()
					runErr[p] = cmd.Run()
				}()
			}
			wg.Wait()
			for p := range procs {
				if runErr[p] != nil {
					t.Fatalf("process %d: %v\n%s", p, runErr[p], errs[p].String())
				}
			}
			type answer struct{ id, how string }
			byRound := map[string][]answer{}
			for p := range procs {
				for _, line := range strings.Split(strings.TrimSpace(outs[p].String()), "\n") {
					f := strings.Fields(line)
					if len(f) != 3 {
						t.Fatalf("process %d: bad line %q", p, line)
					}
					byRound[f[0]] = append(byRound[f[0]], answer{f[1], f[2]})
				}
			}
			if len(byRound) != rounds {
				t.Fatalf("%d rounds answered, want %d", len(byRound), rounds)
			}
			for r, as := range byRound {
				ids := map[string]bool{}
				fresh := 0
				for _, a := range as {
					ids[a.id] = true
					if a.how == "new" {
						fresh++
					}
				}
				if len(as) != procs*goroutines || len(ids) != 1 || fresh != 1 {
					t.Errorf("round %s: %d answers naming %v, %d new; want %d naming one job, new once", r, len(as), keys(ids), fresh, procs*goroutines)
				}
			}
			page, err := e.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{Queues: []string{"unique"}}, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			perKey := map[string]int{}
			for _, j := range page.Jobs {
				perKey[j.UniqueKey]++
			}
			if len(page.Jobs) != rounds || len(perKey) != rounds {
				t.Fatalf("the store holds %d jobs under %d keys, want %d of each", len(page.Jobs), len(perKey), rounds)
			}
		})
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
