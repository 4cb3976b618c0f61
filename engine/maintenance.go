package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/outage"
)

// leaseLoop renews this process's leases and says it lives. A job whose
// lease is found lost has its handler's context cancelled.
func (e *Engine) leaseLoop() {
	renewEvery := max(e.cfg.LeaseDuration/3, 10*time.Millisecond)
	renew := time.NewTicker(renewEvery)
	defer renew.Stop()
	beat := time.NewTicker(e.cfg.HeartbeatInterval)
	defer beat.Stop()
	ctx := e.hardCtx
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			began := time.Now()
			// The heartbeat keeps its ticker's cadence through an outage
			// (its backoff is ignored): a beat later than the interval
			// after the store is back would let other processes' reapers
			// call this one dead.
			err := e.heartbeat(ctx)
			if err != nil && ctx.Err() == nil {
				e.contact.fail()
				if !outage.StoreUnavailable(err) {
					e.log.Warn("heartbeat failed", "err", err)
				}
				e.outHeartbeat.Fail(err)
			} else if err == nil {
				e.outHeartbeat.Succeed()
			}
			if e.slow(began) {
				// A store that blocks writes (a lock, a failover) is a
				// break in contact too: other workers' beats waited as well.
				e.contact.fail()
			} else if err == nil {
				e.contact.ok()
			}
		case <-renew.C:
			e.renewLeases(ctx)
		}
	}
}

func (e *Engine) renewLeases(ctx context.Context) {
	held := e.running.all()
	if len(held) == 0 {
		return
	}
	refs := make([]backend.JobRef, len(held))
	for i, r := range held {
		refs[i] = r.ref
	}
	res, err := e.store.JobLeaseRenew(ctx, &backend.JobLeaseRenewParams{Items: refs, LeaseDuration: e.cfg.LeaseDuration})
	if err != nil {
		if ctx.Err() == nil {
			e.contact.fail()
			if !outage.StoreUnavailable(err) {
				e.log.Warn("lease renewal failed", "jobs", len(refs), "err", err)
			}
			// Like the heartbeat, renewals keep their cadence: a lease
			// renewed late after the store is back is a lease lost.
			e.outRenew.Fail(err, "jobs", len(refs))
		}
		return
	}
	e.outRenew.Succeed()
	for i, rerr := range res {
		if !errors.Is(rerr, ErrLeaseLost) {
			continue
		}
		if held[i].acked.Load() || held[i].returned.Load() {
			// Its handler has returned and its outcome was written
			// between the snapshot and the renewal (or is being
			// written, and its fence decides): nothing runs to cancel.
			e.log.Debug("lease renewal found the job finished", "job", refs[i].ID)
			continue
		}
		// The handler is still running on a job this process no longer
		// holds: another worker may run it too.
		e.log.Warn("lease lost; cancelling the handler", "job", refs[i].ID)
		held[i].lost()
	}
}

// Maintenance tasks, each led by one engine at a time through its own
// lease in the store.
const (
	taskSchedule  = "schedule"
	taskReap      = "reap"
	taskRetention = "retention"
	taskReconcile = "reconcile"
)

// reconcileEvery is how often the maintained counts are checked against
// the jobs themselves.
const reconcileEvery = 10 * time.Minute

// maintenanceBatch bounds every maintenance write.
const maintenanceBatch = 1000

func (e *Engine) maintenanceLoop() {
	t := time.NewTicker(e.cfg.MaintenanceInterval)
	defer t.Stop()
	ctx := e.runCtx
	defer e.resignAll()
	for {
		if wait, down := e.maintainTick(ctx); down {
			// The store did not answer: back off rather than meet it
			// again at every tick.
			if !outage.Sleep(ctx, wait) {
				return
			}
			t.Reset(e.cfg.MaintenanceInterval)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maintain runs one tick of every task this engine leads.
func (e *Engine) maintain(ctx context.Context) { e.maintainTick(ctx) }

// maintainTick runs one tick of every task this engine leads. A store
// that does not answer ends the tick (the other tasks would only meet it
// too) and reports the backoff to wait; one Outage covers all the tasks,
// so an outage is one line however many tasks it meets.
func (e *Engine) maintainTick(ctx context.Context) (time.Duration, bool) {
	for _, task := range []struct {
		name string
		run  func(context.Context) error
	}{
		{taskSchedule, e.scheduleDue},
		{taskReap, e.reap},
		{taskRetention, e.sweepExpired},
		{taskReconcile, e.reconcileCounts},
	} {
		if ctx.Err() != nil {
			return 0, false
		}
		began := time.Now()
		lead, err := e.store.LeaderAttempt(ctx, &backend.LeaderAttemptParams{
			Name: task.name, Holder: e.cfg.WorkerID, TTL: e.leaderTTL(),
		})
		if err == nil {
			if e.slow(began) {
				e.contact.fail()
			} else {
				e.contact.ok()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return 0, false
			}
			e.contact.fail()
			if !outage.StoreUnavailable(err) {
				e.log.Warn("maintenance lease failed", "task", task.name, "err", err)
				continue
			}
			return e.outMaint.Fail(err, "task", task.name, "step", "lease"), true
		}
		if !lead {
			continue
		}
		if err := task.run(ctx); err != nil && ctx.Err() == nil {
			e.contact.fail()
			if !outage.StoreUnavailable(err) {
				e.log.Warn("maintenance task failed", "task", task.name, "err", err)
				continue
			}
			return e.outMaint.Fail(err, "task", task.name, "step", "run"), true
		}
	}
	e.outMaint.Succeed()
	return 0, false
}

func (e *Engine) leaderTTL() time.Duration {
	return max(5*e.cfg.MaintenanceInterval, time.Second)
}

// resignAll's context keeps the values of Start's (hardCtx) without its
// end, as every other write of the engine does.
func (e *Engine) resignAll() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(e.hardCtx), 2*time.Second)
	defer cancel()
	for _, name := range []string{taskSchedule, taskReap, taskRetention, taskReconcile} {
		_ = e.store.LeaderResign(ctx, &backend.LeaderResignParams{Name: name, Holder: e.cfg.WorkerID})
	}
}

// RunMaintenance runs one tick of every maintenance task now, taking the
// leases it can. For tests and for commands that drive the store without a
// running engine.
func (e *Engine) RunMaintenance(ctx context.Context) {
	e.maintain(ctx)
}

// scheduleDue moves due scheduled and retryable jobs to available and wakes
// this process's runners of their queues.
func (e *Engine) scheduleDue(ctx context.Context) error {
	row, err := backend.TransitionFor(backend.TriggerDue)
	if err != nil {
		return err
	}
	// Retries go before first runs when more are due than a batch takes.
	from := slices.Clone(row.From)
	slices.SortStableFunc(from, func(a, b State) int {
		return cmp.Compare(boolInt(b == StateRetryable), boolInt(a == StateRetryable))
	})
	for range 10 {
		queues, err := e.store.JobScheduleDue(ctx, &backend.JobScheduleDueParams{From: from, To: row.To, Limit: maintenanceBatch})
		if err != nil {
			return fmt.Errorf("schedule due jobs: %w", err)
		}
		for _, q := range queues {
			e.wake(q)
		}
		if len(queues) == 0 {
			return nil
		}
	}
	return nil
}

// reap reclaims expired leases. A job whose worker still heartbeats lost
// its lease to a stall or an outage: it goes back to available, charged
// nothing. A job whose worker is gone too crashed with it: one crash
// attempt. Crashes are charged only after this process has reached the
// store without a break for a heartbeat TTL and reconnectGrace more, since
// its start or its last outage, so that the living workers have had time
// to reconnect and beat again.
func (e *Engine) reap(ctx context.Context) error {
	expired, err := e.store.JobListExpiredLeases(ctx, &backend.JobListExpiredLeasesParams{Limit: maintenanceBatch})
	if err != nil {
		return fmt.Errorf("list expired leases: %w", err)
	}
	trusted := e.contact.trusts(e.heartbeatTTL())
	// A crash charge must land while this view holds: a write the store
	// holds back past it (an outage that began after the listing) is
	// refused, and the next round looks again.
	chargeBy := e.clock.now().Add(e.cfg.HeartbeatInterval)
	for _, x := range expired {
		j := x.Job
		if j.Lease == nil {
			continue
		}
		ref := backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Lease.Fence}
		var res handlerResult
		switch {
		case x.WorkerAlive || j.Lease.WorkerID == e.cfg.WorkerID:
			res = handlerResult{trigger: backend.TriggerLeaseLost, message: fmt.Sprintf("lease of worker %s expired while it lives; released without charge", j.Lease.WorkerID)}
		case !trusted:
			continue
		default:
			res = handlerResult{trigger: backend.TriggerCrash, message: fmt.Sprintf("worker %s stopped heartbeating while running the job (process gone)", j.Lease.WorkerID)}
			res.before = chargeBy
			res.checkpoint = crashedStepCheckpoint(j, res.message)
		}
		e.finishReaped(ctx, ref, j, res)
	}
	return nil
}

// sweepRetention deletes terminal jobs past their retention, in bounded
// batches.
func (e *Engine) sweepRetention(ctx context.Context) error {
	perQueue := e.queueOverrides()
	for range 10 {
		n, err := e.store.JobDeleteExpired(ctx, &backend.JobDeleteExpiredParams{
			Retention: e.cfg.Retention, QueueRetention: perQueue, Limit: maintenanceBatch,
		})
		if err != nil {
			return fmt.Errorf("retention sweep: %w", err)
		}
		if n < maintenanceBatch {
			return nil
		}
	}
	return nil
}

// reconcileCounts recounts the maintained counters from the jobs, at most
// every reconcileEvery, so a drift (a bug, a hand edit) does not last.
// The first recount comes one interval after start, not at start: the
// counters are exact after a restart (written with every change), and a
// recount reads every job — seconds at a million — which a console or
// worker just started should not wait behind.
func (e *Engine) reconcileCounts(ctx context.Context) error {
	if !backend.Declares(e.store, backend.CapabilityCounts) {
		return nil
	}
	last := e.lastReconcile.Load()
	if last == 0 {
		e.lastReconcile.CompareAndSwap(0, time.Now().UnixNano())
		return nil
	}
	if time.Since(time.Unix(0, last)) < reconcileEvery {
		return nil
	}
	e.lastReconcile.Store(time.Now().UnixNano())
	if err := e.store.JobCountReconcile(ctx); err != nil {
		return fmt.Errorf("reconcile counts: %w", err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// slow reports whether a store call that began at began took longer than
// a heartbeat interval: the store held it back.
func (e *Engine) slow(began time.Time) bool {
	return time.Since(began) > e.cfg.HeartbeatInterval
}
