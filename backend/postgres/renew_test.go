package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestRenewPassesLockedRowsBy: a renewal does not wait for a row another
// transaction holds (a completion committing): that item comes back
// ErrBusy, unchanged, while the others are renewed; a lease that does not
// match is ErrLeaseLost as before, and once the row is free the next
// renewal extends it.
func TestRenewPassesLockedRowsBy(t *testing.T) {
	ctx := context.Background()
	s := schemaStore(t, "renew")
	insertAvailable(t, s, "q", "r", 1, 3)
	jobs := claimN(t, s, "q", 3)
	if len(jobs) != 3 {
		t.Fatalf("claimed %d", len(jobs))
	}
	held, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if _, err := held.Exec(ctx, s.sql(`SELECT 1 FROM {s}.jobs WHERE id = $1 FOR UPDATE`), jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	items := []backend.JobRef{
		{ID: jobs[0].ID, LeaseID: jobs[0].Lease.ID, Fence: jobs[0].Fence},
		{ID: jobs[1].ID, LeaseID: jobs[1].Lease.ID, Fence: jobs[1].Fence},
		{ID: jobs[2].ID, LeaseID: "someone-else", Fence: jobs[2].Fence},
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a wait on the lock would hit it
	defer cancel()
	res, err := s.JobLeaseRenew(rctx, &backend.JobLeaseRenewParams{Items: items, LeaseDuration: time.Hour})
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	if !errors.Is(res[0], sluicetype.ErrBusy) || res[1] != nil || !errors.Is(res[2], sluicetype.ErrLeaseLost) {
		t.Fatalf("renew results %v, want busy, nil, lease lost", res)
	}
	expiry := func(id string) time.Time {
		t.Helper()
		j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		return j.Lease.ExpiresAt
	}
	if got := expiry(jobs[0].ID); !got.Equal(jobs[0].Lease.ExpiresAt) {
		t.Fatalf("the busy row's lease moved to %v", got)
	}
	if got := expiry(jobs[1].ID); !got.After(jobs[1].Lease.ExpiresAt.Add(30 * time.Minute)) {
		t.Fatalf("the free row's lease is %v, not renewed by an hour", got)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = s.JobLeaseRenew(ctx, &backend.JobLeaseRenewParams{Items: items[:1], LeaseDuration: time.Hour})
	if err != nil || res[0] != nil {
		t.Fatalf("renew once free: %v %v", res, err)
	}
	if got := expiry(jobs[0].ID); !got.After(jobs[0].Lease.ExpiresAt.Add(30 * time.Minute)) {
		t.Fatalf("the freed row's lease is %v, not renewed", got)
	}
}
