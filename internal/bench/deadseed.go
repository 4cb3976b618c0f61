package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/engine"
)

// The deadline seeding of the deadletter and api scenarios: a million
// deaths through failing handlers take 20 minutes and more on PostgreSQL
// and Redis (one finish transaction per death), so --seed deadline writes
// them the way a claim archives jobs whose deadline has passed: jobs are
// enqueued through the engine with a deadline an hour ago, then claims
// with the engine's past-deadline write and no room for running jobs
// archive them a thousand per statement (per script on Redis). Each job
// is a real death written by the store's own claim path — state, terminal
// reason deadline_exceeded, last error and its pattern (the error group),
// an archived event, the maintained counters. What it lacks next to a
// handler's death is the error entry of an attempt that never ran.

// deadGroup is one (kind, error) pair of deadKinds: an error group.
type deadGroup struct{ kind, err int }

func deadGroups() []deadGroup {
	var gs []deadGroup
	for k, kind := range deadKinds {
		for e := range kind.errs {
			gs = append(gs, deadGroup{k, e})
		}
	}
	return gs
}

// deadGroupOf is the group of job i, as the handlers of benchDeadSeed
// choose its kind and error.
func deadGroupOf(i int) deadGroup {
	k := i % len(deadKinds)
	return deadGroup{k, (i / len(deadKinds)) % len(deadKinds[k].errs)}
}

// benchDeadSeedDeadline seeds n dead jobs on queue by deadline and returns
// the ids of deadSamples of them. Groups are seeded one after the other,
// because a claim writes one error message for all the jobs it archives.
func benchDeadSeedDeadline(ctx context.Context, store backend.Store, o *benchDeadOptions,
	progress func(string, ...any), res *benchResult) ([]string, error) {
	e, err := engine.New(store, engine.Config{NoMaintenance: true})
	if err != nil {
		return nil, err
	}
	byGroup := map[deadGroup][]int{}
	for i := range o.jobs {
		g := deadGroupOf(i)
		byGroup[g] = append(byGroup[g], i)
	}
	every := max(1, o.jobs/deadSamples)
	var (
		mu      sync.Mutex
		samples []string
	)
	past := time.Now().Add(-time.Hour)
	var insertDur, deadDur time.Duration
	for _, g := range deadGroups() {
		idx := byGroup[g]
		if len(idx) == 0 {
			continue
		}
		kind := deadKinds[g.kind]
		t0 := time.Now()
		err := enqueueBatches(ctx, e, len(idx), o.batch, o.insertConc,
			func(k int) engine.EnqueueParams {
				return engine.EnqueueParams{Queue: o.queue, Kind: kind.name, MaxAttempts: 1, Deadline: &past,
					Payload: []byte(kind.payload(idx[k]))}
			},
			func(k int, j *engine.Job) {
				if idx[k]%every == 0 {
					mu.Lock()
					samples = append(samples, j.ID)
					mu.Unlock()
				}
			})
		if err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
		insertDur += time.Since(t0)
		t1 := time.Now()
		msg := kind.errs[g.err](idx[0])
		// Redis runs one script at a time: more claimers only queue.
		conc := o.insertConc
		if _, ok := store.(*redis.Store); ok {
			conc = 1
		}
		n, err := deadClaimAll(ctx, store, o.queue, msg, conc)
		if err != nil {
			return nil, err
		}
		if n != int64(len(idx)) {
			return nil, fmt.Errorf("seed %s: archived %d of %d past their deadline", kind.name, n, len(idx))
		}
		deadDur += time.Since(t1)
		progress("seeded %d dead %s jobs (%s)", len(idx), kind.name, engine.NormalizeError(msg))
	}
	res.add("insert_seconds", insertDur)
	res.add("insert_per_sec", float64(o.jobs)/insertDur.Seconds())
	res.add("dead_seconds", deadDur)
	res.add("dead_per_sec", float64(o.jobs)/deadDur.Seconds())
	res.add("handler_seconds", 0)
	return samples, nil
}

// deadClaimAll archives every available job of queue past its deadline,
// writing msg as their error, from conc claimers at once, and returns how
// many it archived.
func deadClaimAll(ctx context.Context, store backend.Store, queue, msg string, conc int) (int64, error) {
	w := backend.ClaimDeadlineWrite{To: engine.StateArchived, Reason: engine.ReasonDeadlineExceeded,
		LastError: msg, Pattern: engine.NormalizeError(msg),
		Event: backend.EventWrite{Kind: engine.EventArchived, Actor: "bench-seed", From: engine.StateAvailable,
			To: engine.StateArchived, Message: msg}}
	var total atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, conc)
	for c := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := store.JobClaim(ctx, &backend.JobClaimParams{Queue: queue, WorkerID: "bench-seed",
					LeaseID: fmt.Sprintf("bench-seed-%d", c), PastDeadline: w})
				if err != nil {
					errc <- fmt.Errorf("claim: %w", err)
					return
				}
				if len(r.Jobs) > 0 {
					errc <- fmt.Errorf("claim: took %d jobs to run", len(r.Jobs))
					return
				}
				if len(r.Dead) == 0 {
					return
				}
				total.Add(int64(len(r.Dead)))
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	return total.Load(), nil
}
