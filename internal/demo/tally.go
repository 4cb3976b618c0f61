package demo

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// Tally counts what this process's engine tells its store, per queue:
// enqueues, claims, completions and every other outcome. It wraps the store
// the engine is given (Wrap) and hears the death handlers (OnDead), so it
// needs nothing from the store beyond backend.Store and adds nothing to it.
// It sees only this process: jobs other processes enqueue or finish are not
// in it. Until the console reads the store's counters, it is the demo's
// summary.
type Tally struct {
	mu       sync.Mutex
	queues   map[string]*QueueTally
	inflight map[string]string // job id -> queue, while this process holds it
	deaths   []Death           // newest last, at most keepDeaths
	errors   int               // store calls that failed as a whole
}

// QueueTally is one queue's counts.
type QueueTally struct {
	Queue    string
	Enqueued int
	// Refused enqueues: quarantined fingerprints, conflicts, bad input.
	Refused int
	// Ran counts claims: each is one handler call (or one upcast failure).
	Ran int
	// Running is how many of the queue's jobs this process holds now.
	Running   int
	Completed int
	// Failed counts failed attempts that will be retried; Crashed the
	// crashes (panics, dead processes) that will be.
	Failed      int
	Crashed     int
	Snoozed     int
	Released    int
	Revoked     int
	Archived    int
	Quarantined int
	Undecodable int
}

// Dead is how many of the queue's jobs died here.
func (q QueueTally) Dead() int { return q.Archived + q.Quarantined }

// Death is one death heard by the tally's death handler.
type Death struct {
	At     time.Time
	JobID  string
	Queue  string
	Kind   string
	Reason engine.DeathReason
	Error  string
}

const keepDeaths = 6

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{queues: map[string]*QueueTally{}, inflight: map[string]string{}}
}

// Wrap returns s with every write the engine makes counted. Hand the result
// to engine.New.
// The store's schedules are passed through, so the demo's schedules fire
// on the tallied store too.
func (t *Tally) Wrap(s backend.Store) backend.Store {
	ts := &tallyStore{Store: s, t: t}
	if ss, err := backend.ScheduleStoreOf(s); err == nil {
		return &tallyScheduleStore{tallyStore: ts, ScheduleStore: ss}
	}
	return ts
}

// tallyScheduleStore is a tallied store that keeps schedules.
type tallyScheduleStore struct {
	*tallyStore
	backend.ScheduleStore
}

// OnDead is a death handler: register it with Engine.OnDead to see the
// latest deaths in Snapshot.
func (t *Tally) OnDead(_ context.Context, ev engine.DeathEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := Death{At: time.Now(), JobID: ev.Job.ID, Queue: ev.Job.Queue, Kind: ev.Job.Kind, Reason: ev.Reason, Error: ev.Error}
	t.deaths = append(t.deaths, d)
	if len(t.deaths) > keepDeaths {
		t.deaths = append(t.deaths[:0], t.deaths[len(t.deaths)-keepDeaths:]...)
	}
}

// Snapshot is a copy of the counts at one moment.
type Snapshot struct {
	// Queues in name order; Total sums them.
	Queues []QueueTally
	Total  QueueTally
	// Deaths are the latest, newest last.
	Deaths      []Death
	StoreErrors int
}

// Snapshot copies the counts.
func (t *Tally) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Snapshot{Deaths: append([]Death(nil), t.deaths...), StoreErrors: t.errors}
	s.Total.Queue = "total"
	for _, q := range t.queues {
		s.Queues = append(s.Queues, *q)
		s.Total.Enqueued += q.Enqueued
		s.Total.Refused += q.Refused
		s.Total.Ran += q.Ran
		s.Total.Running += q.Running
		s.Total.Completed += q.Completed
		s.Total.Failed += q.Failed
		s.Total.Crashed += q.Crashed
		s.Total.Snoozed += q.Snoozed
		s.Total.Released += q.Released
		s.Total.Revoked += q.Revoked
		s.Total.Archived += q.Archived
		s.Total.Quarantined += q.Quarantined
		s.Total.Undecodable += q.Undecodable
	}
	sort.Slice(s.Queues, func(i, j int) bool { return s.Queues[i].Queue < s.Queues[j].Queue })
	return s
}

// q returns queue name's counts; t.mu is held.
func (t *Tally) q(name string) *QueueTally {
	if name == "" {
		name = "?"
	}
	q := t.queues[name]
	if q == nil {
		q = &QueueTally{Queue: name}
		t.queues[name] = q
	}
	return q
}

// release forgets a held job and returns its queue; t.mu is held.
func (t *Tally) release(id string) (string, bool) {
	queue, ok := t.inflight[id]
	if ok {
		delete(t.inflight, id)
		t.q(queue).Running--
	}
	return queue, ok
}

// tallyStore is the engine's store with the tally listening. Embedding
// passes every method on; the four that change counts are overridden.
type tallyStore struct {
	backend.Store
	t *Tally
}

func (s *tallyStore) failed(err error) {
	if err != nil {
		s.t.mu.Lock()
		s.t.errors++
		s.t.mu.Unlock()
	}
}

func (s *tallyStore) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) ([]backend.JobInsertResult, error) {
	res, err := s.Store.JobInsertMany(ctx, p)
	s.failed(err)
	if err != nil {
		return res, err
	}
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	for i, r := range res {
		queue := ""
		if i < len(p.Jobs) {
			queue = p.Jobs[i].Queue
		}
		switch {
		case r.Err != nil:
			s.t.q(queue).Refused++
		case !r.Existing:
			s.t.q(queue).Enqueued++
		}
	}
	return res, nil
}

func (s *tallyStore) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	res, err := s.Store.JobClaim(ctx, p)
	if ctx.Err() == nil {
		s.failed(err)
	}
	if err != nil || res == nil {
		return res, err
	}
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	for _, j := range res.Jobs {
		q := s.t.q(j.Queue)
		q.Ran++
		q.Running++
		s.t.inflight[j.ID] = j.Queue
	}
	for _, j := range res.Dead {
		s.t.q(j.Queue).Archived++
	}
	return res, nil
}

func (s *tallyStore) JobCompleteMany(ctx context.Context, p *backend.JobCompleteManyParams) ([]error, error) {
	res, err := s.Store.JobCompleteMany(ctx, p)
	s.failed(err)
	if err != nil {
		return res, err
	}
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	for i, item := range p.Items {
		queue, _ := s.t.release(item.ID)
		if i < len(res) && res[i] == nil {
			s.t.q(queue).Completed++
		}
	}
	return res, nil
}

func (s *tallyStore) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*engine.Job, error) {
	j, err := s.Store.JobFinish(ctx, p)
	s.failed(err)
	if err != nil {
		return j, err
	}
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	queue, held := s.t.release(p.ID)
	if j != nil {
		queue = j.Queue
	} else if !held {
		queue = "?"
	}
	q := s.t.q(queue)
	switch p.To {
	case engine.StateRetryable:
		if p.Charge == backend.ChargeCrash {
			q.Crashed++
		} else {
			q.Failed++
		}
	case engine.StateScheduled:
		q.Snoozed++
	case engine.StateAvailable:
		q.Released++
	case engine.StateDeleted:
		q.Revoked++
	case engine.StateArchived:
		q.Archived++
	case engine.StateQuarantined:
		q.Quarantined++
	case engine.StateUndecodable:
		q.Undecodable++
	}
	return j, nil
}
