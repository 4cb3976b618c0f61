package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// IdempotencyEngine is what EngineIdempotencyStore needs of the engine: an
// *engine.Engine has it, and offers it when IdempotencyDurable says so
// (its store declares backend.CapabilityIdempotency).
type IdempotencyEngine interface {
	IdempotencyDurable() bool
	IdempotencyClaim(ctx context.Context, p *engine.IdempotencyClaimParams) (*engine.IdempotencyClaim, error)
	IdempotencyRenew(ctx context.Context, p *engine.IdempotencyRenewParams) error
	IdempotencyComplete(ctx context.Context, p *engine.IdempotencyCompleteParams) error
	IdempotencyRelease(ctx context.Context, p *engine.IdempotencyReleaseParams) error
}

var _ IdempotencyEngine = (*engine.Engine)(nil)

// DefaultIdempotencyClaimTTL is how long a request holds its key without
// renewing it: the claim of a server that died is taken over after it.
const DefaultIdempotencyClaimTTL = engine.DefaultIdempotencyClaimTTL

// EngineIdempotencyStore keeps keys in the engine's store. The key goes
// into the engine with the mutation (engine.WithIdempotency), and every
// write the mutation makes commits in the same transaction as a step of
// the key's record, so a crash can neither lose the record nor run the
// mutation twice; the rendered response is stored when the request ends.
// The record is shared by every server on the store and survives
// restarts. A request holds its key with a claim renewed while it runs; a
// claim whose server died expires after the claim TTL, and the next
// request with the key takes it over: the engine answers what the dead
// request had committed with the results it recorded, runs the rest, and
// refuses the dead request's late writes.
type EngineIdempotencyStore struct {
	e        IdempotencyEngine
	ttl      time.Duration
	claimTTL time.Duration
}

// NewEngineIdempotencyStore keeps keys through e for ttl
// (DefaultIdempotencyTTL when 0), each request holding its key for
// claimTTL at a time (DefaultIdempotencyClaimTTL when 0), renewed every
// third of it while the request runs.
func NewEngineIdempotencyStore(e IdempotencyEngine, ttl, claimTTL time.Duration) *EngineIdempotencyStore {
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	if claimTTL <= 0 {
		claimTTL = DefaultIdempotencyClaimTTL
	}
	return &EngineIdempotencyStore{e: e, ttl: ttl, claimTTL: claimTTL}
}

// Durable is true: the records are in the engine's store.
func (s *EngineIdempotencyStore) Durable() bool { return true }

func (s *EngineIdempotencyStore) Begin(ctx context.Context, key, hash string) (IdempotencyOutcome, *StoredResponse, IdempotencyHold, error) {
	c, err := s.e.IdempotencyClaim(ctx, &engine.IdempotencyClaimParams{Key: key, RequestHash: hash, TTL: s.ttl, ClaimTTL: s.claimTTL})
	switch {
	case errors.Is(err, engine.ErrIdempotencyInFlight):
		return IdempotencyInFlight, nil, nil, nil
	case errors.Is(err, engine.ErrIdempotencyMismatch):
		return IdempotencyMismatch, nil, nil, nil
	case err != nil:
		return 0, nil, nil, err
	}
	if c.Token == "" {
		var resp StoredResponse
		if err := json.Unmarshal(c.Response, &resp); err != nil {
			return 0, nil, nil, fmt.Errorf("stored response: %w", err)
		}
		return IdempotencyReplay, &resp, nil, nil
	}
	h := &engineHold{s: s, p: engine.IdempotencyParams{Key: key, Token: c.Token, Steps: c.Steps}, stop: make(chan struct{})}
	h.wg.Go(h.renew)
	return IdempotencyStarted, nil, h, nil
}

// engineHold is a request's claim on its key in the engine's store.
type engineHold struct {
	s    *EngineIdempotencyStore
	p    engine.IdempotencyParams
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// renew extends the claim every third of its TTL until the request ends.
func (h *engineHold) renew() {
	t := time.NewTicker(max(h.s.claimTTL/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.s.claimTTL)
		err := h.s.e.IdempotencyRenew(ctx, &engine.IdempotencyRenewParams{Key: h.p.Key, Token: h.p.Token, ClaimTTL: h.s.claimTTL})
		cancel()
		if errors.Is(err, engine.ErrIdempotencyInFlight) {
			return // taken over: the engine refuses this request's writes now
		}
	}
}

// end stops the renewal.
func (h *engineHold) end() {
	h.once.Do(func() { close(h.stop) })
	h.wg.Wait()
}

func (h *engineHold) Context(ctx context.Context) context.Context {
	return engine.WithIdempotency(ctx, h.p)
}

func (h *engineHold) Complete(ctx context.Context, resp StoredResponse) error {
	h.end()
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	return h.s.e.IdempotencyComplete(engine.WithoutIdempotency(ctx), &engine.IdempotencyCompleteParams{Key: h.p.Key, Token: h.p.Token, Response: b})
}

func (h *engineHold) Abandon(ctx context.Context) error {
	h.end()
	return h.s.e.IdempotencyRelease(engine.WithoutIdempotency(ctx), &engine.IdempotencyReleaseParams{Key: h.p.Key, Token: h.p.Token})
}
