package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Limits: concurrency limits across processes. The store enforces them
// where jobs are claimed (backend.LimitStore); the engine sets them from
// Config.Limits at Start and from Control.SetLimit, and lists them.

// validateLimit refuses a limit no store can hold.
func validateLimit(l Limit) error {
	if !l.Scope.Valid() {
		return fmt.Errorf("%w: limit scope %q: want kind or queue", ErrInvalid, l.Scope)
	}
	if err := sluicetype.ValidateName(string(l.Scope), l.Name); err != nil {
		return err
	}
	if l.Concurrency < 0 {
		return fmt.Errorf("%w: limit %s: concurrency %d is negative", ErrInvalid, l, l.Concurrency)
	}
	if l.Rate < 0 || l.RateWindow < 0 {
		return fmt.Errorf("%w: limit %s: rate %d per %s is negative", ErrInvalid, l, l.Rate, l.RateWindow)
	}
	if l.Key != "" && l.Rate > 0 {
		return fmt.Errorf("%w: limit %s: a partitioned limit has no rate", ErrInvalid, l)
	}
	if l.Key != "" && l.Scope != LimitKind {
		return fmt.Errorf("%w: limit %s: only a kind's limit is partitioned by a payload field", ErrInvalid, l)
	}
	if l.Key != "" && !sluicetype.ValidLimitKey(l.Key) {
		return fmt.Errorf("%w: limit %s: key %q: want a top-level payload field of letters, digits, _ and -", ErrInvalid, l, l.Key)
	}
	return nil
}

// limitStore is the store's LimitStore, or ErrUnsupported.
func (e *Engine) limitStore() (backend.LimitStore, error) {
	return backend.LimitStoreOf(e.store)
}

// setConfigLimits writes Config.Limits to the store. A limit set in code
// must hold before this process claims: an error stops Start.
func (e *Engine) setConfigLimits(ctx context.Context) error {
	if len(e.cfg.Limits) == 0 {
		return nil
	}
	ls, err := e.limitStore()
	if err != nil {
		return err
	}
	for _, l := range e.cfg.Limits {
		if err := ls.LimitSet(ctx, &backend.LimitSetParams{Scope: l.Scope, Name: l.Name,
			Concurrency: l.Concurrency, Key: l.Key, Rate: l.Rate, RateWindow: l.RateWindow,
			Actor: "config:" + e.cfg.WorkerID}); err != nil {
			return fmt.Errorf("engine: set limit %s from the config: %w", l, err)
		}
	}
	return nil
}

// ListLimits returns every limit on the store, sorted by scope and name,
// each with the jobs it counts running now.
func (e *Engine) ListLimits(ctx context.Context) ([]Limit, error) {
	ls, err := e.limitStore()
	if err != nil {
		return nil, err
	}
	return ls.LimitList(ctx)
}

// SetLimit sets the concurrency limit of a kind or a queue across every
// process on the store (l's Scope, Name, Concurrency, Key, Rate and
// RateWindow); neither a concurrency nor a rate removes it. It holds at the next claim of every process,
// within a second. Jobs running past a lowered limit finish; no new one
// starts until the count is below it.
func (e *Engine) SetLimit(ctx context.Context, l Limit) error {
	l = Limit{Scope: l.Scope, Name: l.Name, Concurrency: l.Concurrency, Key: l.Key, Rate: l.Rate, RateWindow: l.RateWindow}
	_, err := intercepted(ctx, e, ActionInfo{Name: "set_limit", Limit: &l}, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, e.setLimit(ctx, l)
	})
	return err
}

// setLimit is SetLimit without the Interceptor.
func (e *Engine) setLimit(ctx context.Context, l Limit) error {
	if _, ok, err := replayed[struct{}](ctx); ok {
		return err
	}
	if err := validateLimit(l); err != nil {
		return err
	}
	ls, err := e.limitStore()
	if err != nil {
		return err
	}
	if err := ls.LimitSet(auditCtx(ctx), &backend.LimitSetParams{Scope: l.Scope, Name: l.Name, Concurrency: l.Concurrency,
		Key: l.Key, Rate: l.Rate, RateWindow: l.RateWindow, Actor: ActorFrom(ctx)}); err != nil {
		return err
	}
	if l.Scope == LimitQueue {
		e.wake(l.Name)
	}
	return nil
}

// heldBy names the limit that holds an available job back, with its
// usage ("limit kind billing.charge 5/5"): the first full one of its
// queue's and its kind's; "" when none is full or the store keeps none.
func (e *Engine) heldBy(ctx context.Context, j *Job) (string, error) {
	ls, err := backend.LimitStoreOf(e.store)
	if err != nil || j.State != StateAvailable {
		return "", nil
	}
	limits, err := ls.LimitList(ctx)
	if err != nil {
		return "", fmt.Errorf("job %s limits: %w", j.ID, err)
	}
	return holdOf(limits, j), nil
}

// markHeld sets HeldBy on a page's available rows, from one read of the
// limits for the whole page: a list is read often, and a read of the
// limits counts running jobs, so it is never made once per row. A page
// with no available row, or a store that keeps no limits, reads nothing.
func (e *Engine) markHeld(ctx context.Context, rows []*Job) error {
	if !slices.ContainsFunc(rows, func(j *Job) bool { return j.State == StateAvailable }) {
		return nil
	}
	ls, err := backend.LimitStoreOf(e.store)
	if err != nil {
		return nil
	}
	limits, err := ls.LimitList(ctx)
	if err != nil {
		return fmt.Errorf("list jobs: limits: %w", err)
	}
	if len(limits) == 0 {
		return nil
	}
	for _, j := range rows {
		if j.State == StateAvailable {
			j.HeldBy = holdOf(limits, j)
		}
	}
	return nil
}

// holdOf is the first of limits that is full and covers j (its kind's
// or its queue's), with its usage; "" when none.
func holdOf(limits []Limit, j *Job) string {
	for _, l := range limits {
		covers := (l.Scope == LimitKind && l.Name == j.Kind) || (l.Scope == LimitQueue && l.Name == j.Queue)
		// A partitioned limit's usage is per partition; Running is all
		// of them, so it names no hold.
		if covers && l.Key == "" && l.Concurrency > 0 && l.Running >= int64(l.Concurrency) {
			return fmt.Sprintf("limit %s %d/%d", l, l.Running, l.Concurrency)
		}
		if covers && l.Rate > 0 && l.Starts >= int64(l.Rate) {
			return fmt.Sprintf("limit %s %d/%d starts per %s", l, l.Starts, l.Rate, l.Window())
		}
	}
	return ""
}
