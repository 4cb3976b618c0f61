package redis_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestVersion5RegroupsOldPatterns: jobs that died under an older
// normaliser, their patterns as it wrote them, are grouped again when the
// namespace is migrated from version 4: the request ids of any letters
// join one group with its count, the two columns part, and the pattern
// filter finds each job under its new pattern.
func TestVersion5RegroupsOldPatterns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, u := migratedStore(t)
	old := backendtest.OldErrorPatterns()
	var ins []*backend.JobInsertParams
	for _, j := range old {
		ins = append(ins, &backend.JobInsertParams{ID: j.ID, Queue: "q", Kind: "k", Payload: []byte(`{}`), SchemaVersion: 1, MaxAttempts: 1})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: ins}); err != nil {
		t.Fatal(err)
	}
	res, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "L", Limit: len(old),
		Kinds: map[string]int{"k": 1}, LeaseDuration: time.Minute})
	if err != nil || len(res.Jobs) != len(old) {
		t.Fatalf("claim: %v %+v", err, res)
	}
	for _, j := range res.Jobs {
		i := slices.IndexFunc(old, func(o backendtest.OldErrorPattern) bool { return o.ID == j.ID })
		o := backendtest.Outcome{JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Lease.Fence},
			To: sluicetype.StateArchived, Reason: sluicetype.ReasonAttemptsExhausted, Charge: backend.ChargeAttempt,
			Error: &sluicetype.AttemptError{Message: old[i].LastError}, ErrorPattern: old[i].Pattern,
			Event: sluicetype.EventArchived, Actor: "w"}
		if _, err := s.JobFinish(ctx, o.Plan(j)); err != nil {
			t.Fatalf("finish %s: %v", j.ID, err)
		}
	}

	s2 := migrateFrom(t, s, u, 4)
	archived := sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}}
	groups, err := s2.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: archived, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.CheckRegrouped(t, groups)
	f := archived
	f.ErrorPattern = "partner api: <n> (request id req_<id>)"
	js, err := s2.JobListPage(ctx, &backend.JobListPageParams{Filter: f, Limit: 10})
	if err != nil || len(js) != 3 {
		t.Fatalf("jobs of the merged group: %v %d", err, len(js))
	}
}
