// Package backendtest is the conformance suite every backend.Store
// implementation runs: the transition table, fencing, concurrent claims,
// crash accounting, quarantine, upcasting, retention. A behaviour change in
// any backend extends this suite first.
//
// A backend's test calls Run with a Harness whose NewStore opens a fresh,
// migrated, empty store and closes it when the test ends:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.Harness{
//			Name:     "sqlite",
//			NewStore: func(t testing.TB) backend.Store { return sqlitetest.New(t) },
//			Truth:    func(t testing.TB, s backend.Store) backendtest.Truth { return sqlitetest.NewTruth(t, s) },
//			Reopen:   func(t testing.TB, s backend.Store) backend.Store { return sqlitetest.Reopen(t, s) },
//		})
//	}
//
// Truth gives the checks the ground truth the Store API does not (counts
// from the jobs themselves, a drift of the maintained counters), and
// Reopen a second store over the same data; a backend implements both on
// its own storage, for tests only. A new backend is done when Run passes
// on it.
//
// Every check gets its own store, so checks run in parallel; the heavy
// concurrency check runs alone, before the others. Checks wait for
// conditions by polling the store under a generous deadline and never
// assert on elapsed time.
package backendtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Harness is what a backend hands the suite.
type Harness struct {
	// Name of the backend, for messages.
	Name string
	// NewStore returns a fresh, migrated, empty store and arranges for it
	// to be closed when t ends (t.Cleanup).
	NewStore func(t testing.TB) backend.Store
	// Control, when set, wraps the engine in the Control the Control
	// checks exercise (the HTTP client against a server over the engine);
	// nil exercises the engine itself.
	Control func(t testing.TB, e *engine.Engine) engine.Control
	// Truth gives the ground truth over s, a store NewStore returned:
	// counts from the jobs themselves, and a drift of the maintained
	// counters (see Truth). The StoreDirect and ControlStore checks need
	// it.
	Truth func(t testing.TB, s backend.Store) Truth
	// Reopen opens a second store over the data of s, a store NewStore
	// returned, as another process would, and closes it when t ends. The
	// checks of two stores at once need it.
	Reopen func(t testing.TB, s backend.Store) backend.Store
}

// check is one conformance check.
type check struct {
	name string
	fn   func(t *testing.T, h Harness)
	// alone: the check runs by itself, not in parallel with the others
	// (it loads the machine on purpose).
	alone bool
}

// checks lists the suite, grouped by area. Names are stable: a backend may
// skip one with -skip 'TestConformance/Area/Name'.
func checks() []check {
	var cs []check
	add := func(area string, list []check) {
		for _, c := range list {
			c.name = area + "/" + c.name
			cs = append(cs, c)
		}
	}
	add("Store", storeChecks())
	add("StoreDirect", directChecks())
	add("Zombie", []check{
		{name: "LateWritesRefused", fn: testZombie},
	})
	add("Outcomes", outcomeChecks())
	add("Quarantine", []check{
		{name: "CrashLimitReleaseProbation", fn: testQuarantine},
		{name: "ReleasedJobOnProbation", fn: testReleasedJobOnProbation},
		{name: "SuspectsInGrowingGroupsTwiceCrashedAlone", fn: testSuspects},
	})
	add("Reaper", []check{
		{name: "DeadWorkerChargedLiveWorkerReleased", fn: testReaper},
		{name: "StoreOutageChargesNoCrash", fn: testStoreOutage},
		{name: "StoreOutageLateReconnectChargesNoCrash", fn: testStoreOutageLateReconnect},
		{name: "StoreOutageFreshReaperChargesNoCrash", fn: testStoreOutageFreshReaper},
		{name: "RenewedLeaseNotReaped", fn: testRenewedLeaseNotReaped},
	})
	add("Limits", limitChecks())
	add("Concurrency", []check{
		{name: "EightEnginesTenThousandJobs", fn: testConcurrency, alone: true},
	})
	add("Upcasting", upcastChecks())
	add("DeathHandlers", []check{
		{name: "OncePerDeathInOrderOnCopies", fn: testDeathHandlers},
		{name: "PanicAndBlockDoNotStopWorkers", fn: testDeathHandlersMisbehave},
	})
	add("Timeline", []check{
		{name: "FailTwiceThenSucceed", fn: testTimeline},
		{name: "CrashesNumberedByRun", fn: testCrashesNumberedByRun},
	})
	add("Retention", retentionChecks())
	add("Shutdown", []check{
		{name: "UnfinishedReleasedUncharged", fn: testShutdownRelease},
		{name: "FinishedWithinBoundCompletes", fn: testShutdownDrain},
	})
	add("Workflow", workflowChecks())
	add("DeadLetter", deadLetterChecks())
	add("Waits", waitChecks())
	add("Plans", planChecks())
	add("Control", controlChecks())
	add("ControlStore", controlStoreChecks())
	add("Triage", triageChecks())
	add("Expiry", expiryChecks())
	add("Audit", append(auditChecks(), auditControlChecks()...))
	add("Selection", selectionChecks())
	add("Idempotency", idempotencyChecks())
	add("Unique", uniqueChecks())
	add("Schedules", scheduleChecks())
	add("Redrive", redriveChecks())
	add("BadInput", []check{
		{name: "RefusedAndNothingStored", fn: testBadInput},
		{name: "IdempotentEnqueueCanonical", fn: testIdempotentEnqueue},
		{name: "UnstorableErrorTextRecorded", fn: testUnstorableErrorText},
		{name: "UnstorableInputRefusedAlike", fn: testUnstorableInput},
	})
	return cs
}

// Run runs every check against h, each as a subtest with its own store.
func Run(t *testing.T, h Harness) {
	run(t, h, checks())
}

// RunAreas runs the checks of the areas named ("Store", "Waits") only,
// for a harness that differs from a backend's full one in how it opens
// its stores, not in what they do (a store on the caller's own pool).
func RunAreas(t *testing.T, h Harness, areas ...string) {
	var cs []check
	for _, c := range checks() {
		area, _, _ := strings.Cut(c.name, "/")
		if slices.Contains(areas, area) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		t.Fatalf("backendtest: no check in the areas %q", areas)
	}
	run(t, h, cs)
}

func run(t *testing.T, h Harness, cs []check) {
	if h.NewStore == nil {
		t.Fatal("backendtest: Harness.NewStore is nil")
	}
	// Parallel checks pause at t.Parallel until this function returns, so
	// the checks that must run alone run first, by themselves.
	for _, c := range cs {
		if c.alone {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
	for _, c := range cs {
		if !c.alone {
			continue
		}
		t.Run(c.name, func(t *testing.T) { c.fn(t, h) })
	}
}

// RunControl runs only the Control, Selection, Triage and Redrive areas and the
// Control checks of Schedules and Audit, for a harness whose Control wraps
// the engine in another implementation (the HTTP client against a server):
// the other areas would only test the same store again.
func RunControl(t *testing.T, h Harness) {
	if h.NewStore == nil {
		t.Fatal("backendtest: Harness.NewStore is nil")
	}
	for _, c := range checks() {
		if !strings.HasPrefix(c.name, "Control/") && !strings.HasPrefix(c.name, "Selection/") && !strings.HasPrefix(c.name, "Schedules/Control") &&
			!strings.HasPrefix(c.name, "Audit/Control") &&
			!strings.HasPrefix(c.name, "Triage/") && !strings.HasPrefix(c.name, "Redrive/") && c.name != "Expiry/EngineFlagsWhatRetentionTakes" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			if !c.alone {
				t.Parallel()
			}
			c.fn(t, h)
		})
	}
}
