package engine

import (
	"sync"
	"sync/atomic"
)

// Crashes and the jobs held ahead of a slot.
//
// A crash's write may quarantine its fingerprint, and a quarantine holds
// the fingerprint's waiting jobs (HoldWrite) — in the store, where a job
// this process claimed ahead of a slot is running under its lease, not
// waiting. So before the write, the process hands its held jobs of that
// fingerprint back to available (uncharged, as at shutdown), and the
// write's hold catches them as it catches every other waiting job; and
// nothing may put such a job back into a buffer until the write has
// landed. Two things could, and did:
//
//   - a claim of this process in flight, or started between the hand-back
//     and the write (the hand-back itself wakes the queue: on PostgreSQL it
//     NOTIFYs), took a sibling while its fingerprint was still on
//     probation or not yet quarantined; once the write had landed, that
//     sibling started from the buffer and crashed as a plain crash
//     (backendtest Quarantine/CrashLimitReleaseProbation: "sib-N:
//     crash_attempt 3 after release");
//   - another slot of the queue, finishing a job meanwhile, took a sibling
//     from the buffer to run next.
//
// crashGate closes both: claims hold it shared from their store call
// until their jobs are in the buffer, a crash's write exclusively, and
// while a crash of a fingerprint is being written no slot takes a held job
// of that fingerprint. The happy path pays one uncontended read lock per
// claim (a batch) and one atomic load per job started.
type crashGate struct {
	// claims is held shared by each claim, from JobClaim until its jobs
	// are held, and exclusively by a crash from the hand-back to the end
	// of its write: a crash waits for claims in flight, and no claim
	// starts before the write has landed.
	claims sync.RWMutex
	// writing counts the crash writes in progress, so that a slot asks
	// about fingerprints only while there are any.
	writing atomic.Int32
	mu      sync.Mutex
	fps     map[string]int // fingerprint → crash writes in progress
}

// begin marks a crash of fp as being written, then waits for the claims
// in flight and stops new ones. Marking first means that a claim that
// lands meanwhile cannot start fp's jobs either (see startable). The
// returned func ends it; it may be called more than once.
func (g *crashGate) begin(fp string) (end func()) {
	g.mu.Lock()
	if g.fps == nil {
		g.fps = map[string]int{}
	}
	g.fps[fp]++
	g.writing.Add(1)
	g.mu.Unlock()
	g.claims.Lock()
	var once sync.Once
	return func() {
		once.Do(func() {
			// The mark goes before claims resume: a claim's jobs held
			// while fp was still marked would wait in buf with no slot
			// to start them (each slot passed them over), where the
			// hand-back, already done, would not take them either.
			g.mu.Lock()
			if g.fps[fp]--; g.fps[fp] <= 0 {
				delete(g.fps, fp)
			}
			g.writing.Add(-1)
			g.mu.Unlock()
			g.claims.Unlock()
		})
	}
}

// startable reports whether a held job of fingerprint fp may start now:
// not while a crash of fp is being written, which hands it back first.
func (g *crashGate) startable(fp string) bool {
	if g.writing.Load() == 0 || fp == "" {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fps[fp] == 0
}

// handBackHeld hands every job of fingerprint fp that this process holds
// ahead of a slot, in any queue, back to available uncharged. Called
// inside crashGate.begin, so no claim adds one meanwhile.
func (e *Engine) handBackHeld(fp string) {
	for _, q := range e.queues {
		if held := q.takeHeld(fp); len(held) > 0 {
			q.handBack(held, msgReleasedAfterCrash)
			// Their places are free: the producer may claim again once
			// the crash's write has landed.
			signal(q.freedCh)
			signal(q.landedCh)
		}
	}
}
