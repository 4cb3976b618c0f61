package api

import (
	"container/list"
	"context"
	"net/http"
	"sync"
	"time"
)

// IdempotencyStore keeps the outcome of each mutating request under its
// Idempotency-Key, so that a retried request is answered with the first
// one's response instead of running twice.
//
// Keys reach the store already scoped to (caller, method, path); the hash
// is of the method, path, query, If-Match and body. An implementation
// must make Begin atomic: of two concurrent Begins with one key, exactly
// one gets IdempotencyStarted.
//
// Two implementations: EngineIdempotencyStore commits the key in the
// engine's store, in the same transaction as the mutation (it survives
// restarts and is shared by every server on the store); the server uses
// it when its engine offers it (an *engine.Engine whose store declares
// backend.CapabilityIdempotency). MemoryIdempotencyStore keeps keys in this
// process only, lost on restart: the fallback.
type IdempotencyStore interface {
	// Begin claims key for a request. It reports IdempotencyStarted with
	// the caller's hold on the key when the key was free (the caller runs
	// the request with hold.Context, then calls hold.Complete or
	// hold.Abandon), IdempotencyReplay with the stored response when the
	// same request completed before, IdempotencyInFlight while the first
	// request runs, and IdempotencyMismatch when the key was used for
	// another request.
	Begin(ctx context.Context, key, hash string) (IdempotencyOutcome, *StoredResponse, IdempotencyHold, error)
	// Durable reports whether records survive the process and are shared
	// with other servers (Meta says "store" then, else "memory").
	Durable() bool
}

// IdempotencyHold is a request's claim on its key, from Begin.
type IdempotencyHold interface {
	// Context returns the context to run the mutation with: a store that
	// commits keys with the mutation hands the key to the engine in it.
	Context(ctx context.Context) context.Context
	// Complete stores the response and ends the claim.
	Complete(ctx context.Context, resp StoredResponse) error
	// Abandon ends a claim whose request did not reach an answer worth
	// keeping (the store was down), so a retry runs afresh — or, when the
	// engine had committed part of it, takes over what it committed.
	Abandon(ctx context.Context) error
}

// IdempotencyOutcome is what IdempotencyStore.Begin found.
type IdempotencyOutcome int

const (
	IdempotencyStarted IdempotencyOutcome = iota
	IdempotencyReplay
	IdempotencyInFlight
	IdempotencyMismatch
)

// StoredResponse is a response kept for replay.
type StoredResponse struct {
	Status int `json:"status"`
	// Header holds the headers worth replaying (Content-Type, ETag,
	// Location).
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// DefaultIdempotencyTTL is how long a key is remembered.
const DefaultIdempotencyTTL = 24 * time.Hour

// MemoryIdempotencyStore is an IdempotencyStore in this process's memory,
// bounded in entries and bytes: past either bound the oldest records go
// first, expired ones before all.
type MemoryIdempotencyStore struct {
	ttl        time.Duration
	maxEntries int
	maxBytes   int64
	now        func() time.Time

	mu      sync.Mutex
	entries map[string]*list.Element
	order   *list.List // of *memRecord, oldest first
	bytes   int64
}

type memRecord struct {
	key     string
	hash    string
	created time.Time
	done    bool
	resp    StoredResponse
	size    int64
}

// NewMemoryIdempotencyStore remembers keys for ttl (DefaultIdempotencyTTL
// when 0), at most maxEntries of them (100,000 when 0) holding at most
// maxBytes of responses (64 MiB when 0).
func NewMemoryIdempotencyStore(ttl time.Duration, maxEntries int, maxBytes int64) *MemoryIdempotencyStore {
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	if maxEntries <= 0 {
		maxEntries = 100_000
	}
	if maxBytes <= 0 {
		maxBytes = 64 << 20
	}
	return &MemoryIdempotencyStore{
		ttl: ttl, maxEntries: maxEntries, maxBytes: maxBytes, now: time.Now,
		entries: map[string]*list.Element{}, order: list.New(),
	}
}

// Len reports how many keys are remembered.
func (m *MemoryIdempotencyStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// Durable is false: the records live in this process.
func (m *MemoryIdempotencyStore) Durable() bool { return false }

func (m *MemoryIdempotencyStore) Begin(_ context.Context, key, hash string) (IdempotencyOutcome, *StoredResponse, IdempotencyHold, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire()
	if el, ok := m.entries[key]; ok {
		r := el.Value.(*memRecord)
		switch {
		case r.hash != hash:
			return IdempotencyMismatch, nil, nil, nil
		case !r.done:
			return IdempotencyInFlight, nil, nil, nil
		}
		resp := r.resp
		resp.Header = r.resp.Header.Clone()
		return IdempotencyReplay, &resp, nil, nil
	}
	r := &memRecord{key: key, hash: hash, created: m.now()}
	r.size = int64(len(key) + len(hash) + 64)
	m.entries[key] = m.order.PushBack(r)
	m.bytes += r.size
	m.evict()
	return IdempotencyStarted, nil, &memHold{m: m, r: r}, nil
}

// memHold is a claim on a MemoryIdempotencyStore key: the record it
// created, which Complete and Abandon touch only while it is still the
// key's (it may have been evicted, and the key claimed again).
type memHold struct {
	m *MemoryIdempotencyStore
	r *memRecord
}

func (h *memHold) Context(ctx context.Context) context.Context { return ctx }

func (h *memHold) Complete(_ context.Context, resp StoredResponse) error {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[h.r.key]
	if !ok || el.Value.(*memRecord) != h.r {
		return nil // evicted while in flight: nothing to keep it in
	}
	r := h.r
	r.done = true
	r.resp = StoredResponse{Status: resp.Status, Header: resp.Header.Clone(), Body: append([]byte(nil), resp.Body...)}
	grow := int64(len(resp.Body))
	for k, vs := range resp.Header {
		grow += int64(len(k))
		for _, v := range vs {
			grow += int64(len(v))
		}
	}
	r.size += grow
	m.bytes += grow
	m.evict()
	return nil
}

func (h *memHold) Abandon(context.Context) error {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.entries[h.r.key]; ok && el.Value.(*memRecord) == h.r {
		m.remove(el)
	}
	return nil
}

// expire drops records older than the TTL; records are in creation order.
func (m *MemoryIdempotencyStore) expire() {
	cut := m.now().Add(-m.ttl)
	for el := m.order.Front(); el != nil; el = m.order.Front() {
		if el.Value.(*memRecord).created.After(cut) {
			return
		}
		m.remove(el)
	}
}

// evict drops the oldest records while over a bound, keeping the newest.
func (m *MemoryIdempotencyStore) evict() {
	for m.order.Len() > 1 && (len(m.entries) > m.maxEntries || m.bytes > m.maxBytes) {
		m.remove(m.order.Front())
	}
}

func (m *MemoryIdempotencyStore) remove(el *list.Element) {
	r := el.Value.(*memRecord)
	m.order.Remove(el)
	delete(m.entries, r.key)
	m.bytes -= r.size
}
