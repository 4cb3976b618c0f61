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
// is of the method, path, query and body. An implementation must make
// Begin atomic: of two concurrent Begins with one key, exactly one gets
// IdempotencyStarted.
//
// The default is MemoryIdempotencyStore: per process, lost on restart.
// Committing the key with the mutation in the engine's store transaction
// (surviving restarts, shared by several servers) needs store support that
// does not exist yet.
type IdempotencyStore interface {
	// Begin claims key for a request. It reports IdempotencyStarted when
	// the key was free (the caller runs the request, then calls Complete
	// or Abandon), IdempotencyReplay with the stored response when the
	// same request completed before, IdempotencyInFlight while the first
	// request runs, and IdempotencyMismatch when the key was used for
	// another request.
	Begin(ctx context.Context, key, hash string) (IdempotencyOutcome, *StoredResponse, error)
	// Complete stores the response of the request that claimed key.
	Complete(ctx context.Context, key string, resp StoredResponse) error
	// Abandon frees a claimed key whose request did not reach an answer
	// worth keeping (the store was down), so a retry runs afresh.
	Abandon(ctx context.Context, key string) error
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
	Status int
	// Header holds the headers worth replaying (Content-Type, ETag,
	// Location).
	Header http.Header
	Body   []byte
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

func (m *MemoryIdempotencyStore) Begin(_ context.Context, key, hash string) (IdempotencyOutcome, *StoredResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire()
	if el, ok := m.entries[key]; ok {
		r := el.Value.(*memRecord)
		switch {
		case r.hash != hash:
			return IdempotencyMismatch, nil, nil
		case !r.done:
			return IdempotencyInFlight, nil, nil
		}
		resp := r.resp
		resp.Header = r.resp.Header.Clone()
		return IdempotencyReplay, &resp, nil
	}
	r := &memRecord{key: key, hash: hash, created: m.now()}
	r.size = int64(len(key) + len(hash) + 64)
	m.entries[key] = m.order.PushBack(r)
	m.bytes += r.size
	m.evict()
	return IdempotencyStarted, nil, nil
}

func (m *MemoryIdempotencyStore) Complete(_ context.Context, key string, resp StoredResponse) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.entries[key]
	if !ok {
		return nil // evicted while in flight: nothing to keep it in
	}
	r := el.Value.(*memRecord)
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

func (m *MemoryIdempotencyStore) Abandon(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.entries[key]; ok {
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
