package sqlite_test

import (
	"context"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/sluicetype"
)

// unfencedCheckpointStore defeats the fence of step writes: it rewrites
// each item's lease to the job's current one, so a zombie's step lands.
type unfencedCheckpointStore struct{ *sqlite.Store }

func (s unfencedCheckpointStore) Unwrap() *sqlite.Store { return s.Store }

func (s unfencedCheckpointStore) JobCheckpoint(ctx context.Context, p *backend.JobCheckpointParams) ([]error, error) {
	q := backend.JobCheckpointParams{Items: append([]backend.JobCheckpointItem(nil), p.Items...)}
	for i, it := range q.Items {
		if j, err := s.Store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: it.ID}); err == nil && j.Lease != nil {
			q.Items[i].LeaseID, q.Items[i].Fence = j.Lease.ID, j.Lease.Fence
		}
	}
	return s.Store.JobCheckpoint(ctx, &q)
}

// unroutedStore drops the dead-letter route of every death, as a store
// that routed deaths outside the death's transaction (or not at all)
// would look to the checks.
type unroutedStore struct{ *sqlite.Store }

func (s unroutedStore) Unwrap() *sqlite.Store { return s.Store }

func (s unroutedStore) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*sluicetype.Job, error) {
	q := *p
	q.DeadLetter = nil
	return s.Store.JobFinish(ctx, &q)
}

// JobClaim drops the routes of the claim's deadline deaths too.
func (s unroutedStore) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	q := *p
	q.PastDeadline.DeadLetter = nil
	return s.Store.JobClaim(ctx, &q)
}
