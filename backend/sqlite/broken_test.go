package sqlite_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/sluicetype"
)

// The suite's checks catch a store that breaks the rule they guard. Each
// broken store below is a test-only wrapper around the real one that
// breaks one rule; the test runs the checks that guard it on the wrapper,
// in a child process, and requires them to fail (and the same checks pass
// on the real store, in TestConformance).

// noCutoffStore drops the cutoff re-check of bulk batches: it moves every
// batch's cutoff a day ahead, so jobs that died after the operation was
// created are swept in.
type noCutoffStore struct{ *sqlite.Store }

func (s noCutoffStore) Unwrap() *sqlite.Store { return s.Store }

func (s noCutoffStore) OperationProcessBatch(ctx context.Context, p *backend.OperationProcessBatchParams) (*backend.OperationBatchResult, error) {
	q := *p
	q.Cutoff = time.Now().Add(24 * time.Hour)
	return s.Store.OperationProcessBatch(ctx, &q)
}

// noStartStore drops a bulk run's start time as it stores the operation,
// so that runners claim it at once, and answers the insert with it as
// asked, as a store that kept the field but never read it would.
type noStartStore struct{ *sqlite.Store }

func (s noStartStore) Unwrap() *sqlite.Store { return s.Store }

func (s noStartStore) OperationInsert(ctx context.Context, p *backend.OperationInsertParams) (*sluicetype.Operation, error) {
	q := *p
	q.StartAt = nil
	op, err := s.Store.OperationInsert(ctx, &q)
	if err == nil {
		op.StartAt = p.StartAt
	}
	return op, err
}

// noWindowStore never records the jobs a batch changed in a canary's
// window, as a store that ignored OperationProcessBatchParams.Recent
// would: the canary then watches its sample alone and never halts.
type noWindowStore struct{ *sqlite.Store }

func (s noWindowStore) Unwrap() *sqlite.Store { return s.Store }

func (s noWindowStore) OperationProcessBatch(ctx context.Context, p *backend.OperationProcessBatchParams) (*backend.OperationBatchResult, error) {
	q := *p
	q.Recent = 0
	return s.Store.OperationProcessBatch(ctx, &q)
}

// ownWordsStore writes a text of its own on worker outcomes' events, as a
// store that decided its own texts would.
type ownWordsStore struct{ *sqlite.Store }

func (s ownWordsStore) Unwrap() *sqlite.Store { return s.Store }

func (s ownWordsStore) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*sluicetype.Job, error) {
	q := *p
	if q.Event != nil {
		e := *q.Event
		e.Message = "the store's own words"
		q.Event = &e
	}
	return s.Store.JobFinish(ctx, &q)
}

// noUniqueStore declares unique keys but writes every job as if it had
// none, as a store that checked and then inserted in two steps would
// let racing enqueues do.
type noUniqueStore struct{ *sqlite.Store }

func (s noUniqueStore) Unwrap() *sqlite.Store { return s.Store }

func (s noUniqueStore) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) ([]backend.JobInsertResult, error) {
	q := *p
	q.Jobs = make([]*backend.JobInsertParams, len(p.Jobs))
	for i, jp := range p.Jobs {
		c := *jp
		c.UniqueKey, c.UniqueStates = "", 0
		q.Jobs[i] = &c
	}
	return s.Store.JobInsertMany(ctx, &q)
}

// auditApartStore appends an action's audit record in a transaction of
// its own before the action's, as a store that wrote the trail beside
// its writes rather than in them would: a death between the two, or a
// refusal, leaves a record of what did not happen.
type auditApartStore struct{ *sqlite.Store }

func (s auditApartStore) Unwrap() *sqlite.Store { return s.Store }

func (s auditApartStore) JobAction(ctx context.Context, p *backend.JobActionParams) (*sluicetype.Job, error) {
	if r, ok := backend.AuditWriteFrom(ctx); ok {
		if _, err := s.Store.AuditAppend(ctx, &backend.AuditAppendParams{Record: *r}); err != nil {
			return nil, err
		}
	}
	return s.Store.JobAction(backend.WithoutAuditWrite(ctx), p)
}

// auditDroppedStore declares the trail but never writes the record an
// action's context carries.
type auditDroppedStore struct{ *sqlite.Store }

func (s auditDroppedStore) Unwrap() *sqlite.Store { return s.Store }

func (s auditDroppedStore) JobAction(ctx context.Context, p *backend.JobActionParams) (*sluicetype.Job, error) {
	return s.Store.JobAction(backend.WithoutAuditWrite(ctx), p)
}

// brokenStores names each broken store and the checks that must fail on it.
var brokenStores = map[string]struct {
	wrap   func(*sqlite.Store) backend.Store
	checks []string
}{
	"audit-apart": {
		wrap:   func(s *sqlite.Store) backend.Store { return auditApartStore{s} },
		checks: []string{"Audit/DeathBeforeCommitLeavesNeither", "Audit/RefusedWriteLeavesNoRecord"},
	},
	"audit-dropped": {
		wrap:   func(s *sqlite.Store) backend.Store { return auditDroppedStore{s} },
		checks: []string{"Audit/RecordCommittedWithTheAction", "Audit/ControlOneRecordPerAction"},
	},
	"no-cutoff": {
		wrap:   func(s *sqlite.Store) backend.Store { return noCutoffStore{s} },
		checks: []string{"Control/BulkLeavesLaterDeathsAlone", "ControlStore/BulkTakesOnlyEarlierDeaths"},
	},
	"no-start": {
		wrap:   func(s *sqlite.Store) backend.Store { return noStartStore{s} },
		checks: []string{"Redrive/ScheduledRunNotStartedBeforeItsTime", "Redrive/ScheduledRunAcrossReopenTakesOnlyThePreview"},
	},
	"no-window": {
		wrap:   func(s *sqlite.Store) backend.Store { return noWindowStore{s} },
		checks: []string{"Redrive/CanaryHaltsWhenTheRedrivenFailAgain"},
	},
	"no-unique": {
		wrap:   func(s *sqlite.Store) backend.Store { return noUniqueStore{s} },
		checks: []string{"Unique/DuplicateReturnsExisting", "Unique/EightGoroutinesOneJob", "Unique/PeriodBuckets"},
	},
	"own-words": {
		wrap:   func(s *sqlite.Store) backend.Store { return ownWordsStore{s} },
		checks: []string{"Plans/SentinelTextsInEveryPlan"},
	},
	"unfenced-checkpoint": {
		wrap:   func(s *sqlite.Store) backend.Store { return unfencedCheckpointStore{s} },
		checks: []string{"Workflow/ZombieStopsAtNextStepNotRecorded", "Workflow/CheckpointGroupEachItemFenced"},
	},
	"unrouted": {
		wrap: func(s *sqlite.Store) backend.Store { return unroutedStore{s} },
		checks: []string{"DeadLetter/WrittenWithTheDeathOrNotAtAll", "DeadLetter/PerKindRuleBeatsDefaultNoTagsOnDeadOnce",
			"DeadLetter/RedrivenDeathRetriesExistingDeadLetter", "DeadLetter/QuarantineTripperRouted",
			"DeadLetter/DeadlineDeathAtClaimRoutedPerKindInsertOrRetry", "DeadLetter/DeadlineDeathAtClaimEngineRuleBeatsDefault"},
	},
}

func TestConformanceCatchesBrokenStores(t *testing.T) {
	if name := os.Getenv("SLUICE_BROKEN_STORE"); name != "" {
		b := brokenStores[name]
		unwrap := func(s backend.Store) backend.Store {
			if w, ok := s.(interface{ Unwrap() *sqlite.Store }); ok {
				return w.Unwrap()
			}
			return s
		}
		backendtest.Run(t, backendtest.Harness{
			Name:     "sqlite-" + name,
			NewStore: func(t testing.TB) backend.Store { return b.wrap(sqlitetest.New(t)) },
			Truth:    func(t testing.TB, s backend.Store) backendtest.Truth { return sqlitetest.NewTruth(t, unwrap(s)) },
			Reopen: func(t testing.TB, s backend.Store) backend.Store {
				return b.wrap(sqlitetest.Reopen(t, unwrap(s)).(*sqlite.Store))
			},
		})
		return
	}
	for name, b := range brokenStores {
		for _, check := range b.checks {
			t.Run(name+"/"+check, func(t *testing.T) {
				t.Parallel()
				parts := strings.Split(check, "/")
				pattern := "^TestConformanceCatchesBrokenStores$"
				for _, p := range parts {
					pattern += "/^" + p + "$"
				}
				cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.count=1")
				cmd.Env = append(os.Environ(), "SLUICE_BROKEN_STORE="+name)
				out, err := cmd.CombinedOutput()
				want := "--- FAIL: TestConformanceCatchesBrokenStores/" + check
				if err == nil || !strings.Contains(string(out), want) {
					t.Fatalf("the %s store passed %s (err %v):\n%s", name, check, err, out)
				}
				t.Logf("%s fails on the %s store, as it must", check, name)
			})
		}
	}
}
