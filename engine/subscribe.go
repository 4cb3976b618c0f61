package engine

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/backend"
)

// subscriberBuffer bounds each subscriber's backlog; past it the
// subscriber is told to resync instead of the engine holding more.
const subscriberBuffer = 256

// bus fans this process's changes out to subscribers.
type bus struct {
	mu    sync.Mutex
	subs  map[*subscriber]struct{}
	count atomic.Int32
}

type subscriber struct {
	ch       chan Change
	overflow atomic.Bool
}

func (b *bus) add(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[*subscriber]struct{}{}
	}
	b.subs[s] = struct{}{}
	b.count.Add(1)
}

func (b *bus) remove(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.subs, s)
	b.count.Add(-1)
}

// send delivers c without blocking: a full subscriber is marked to resync.
func (s *subscriber) send(c Change) {
	if s.overflow.Load() {
		select {
		case s.ch <- Change{Kind: ChangeResync}:
			s.overflow.Store(false)
		default:
			return
		}
	}
	select {
	case s.ch <- c:
	default:
		s.overflow.Store(true)
	}
}

// publish tells subscribers of a change. It costs an atomic load when
// nobody listens, so hot paths may call it.
func (e *Engine) publish(c Change) {
	if e.bus.count.Load() == 0 {
		return
	}
	e.bus.mu.Lock()
	defer e.bus.mu.Unlock()
	for s := range e.bus.subs {
		s.send(c)
	}
}

// Subscribe streams this process's changes and those of other processes.
// Of other processes' changes, a store that declares CapabilityWakeups
// carries at once the batches that made jobs available (inserts, due
// jobs, retries, releases, resumed queues: one Change per queue of a
// notification, State available, no job id; Queue empty for every queue);
// everything else (completions, deaths, operator actions elsewhere) shows
// through a cheap poll of the maintained counters, as on every store. The
// channel closes when ctx ends. A consumer that falls behind gets
// ChangeResync.
//
// A poll that fails (the store is away) sends ChangeLost with the error,
// once for the outage however many polls fail after it, so a console in
// this process learns of the outage within a poll, as one attached over
// HTTP does when its stream drops; the first poll that works again sends
// ChangeResync, since other processes' changes were not heard meanwhile.
func (e *Engine) Subscribe(ctx context.Context) (<-chan Change, error) {
	s := &subscriber{ch: make(chan Change, subscriberBuffer)}
	e.bus.add(s)
	out := make(chan Change, subscriberBuffer)
	var remote <-chan string // nil, so never ready, without wake-ups
	if n, ok := e.notifier(); ok {
		remote = n.Wakeups(ctx)
	}
	go func() {
		defer close(out)
		defer e.bus.remove(s)
		poll := time.NewTicker(time.Second)
		defer poll.Stop()
		var last map[string]map[State]int64
		// lost: the consumer was told the store is away (ChangeLost) and
		// has not been told it is back.
		lost := false
		deliver := func(c Change) bool {
			select {
			case out <- c:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-s.ch:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			case q := <-remote:
				select {
				case out <- remoteChange(q):
				default:
					s.overflow.Store(true)
				}
			case <-poll.C:
				now, err := e.store.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if !lost {
						lost = true
						if !deliver(Change{Kind: ChangeLost, Err: err}) {
							return
						}
					}
					continue
				}
				if lost {
					lost = false
					last = now
					if !deliver(Change{Kind: ChangeResync}) {
						return
					}
					continue
				}
				if last != nil && !countsEqual(last, now) {
					select {
					case out <- Change{Kind: ChangeJob}:
					default:
						s.overflow.Store(true)
					}
				}
				last = now
			}
		}
	}()
	return out, nil
}

func countsEqual(a, b map[string]map[State]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[State]int64) bool { return maps.Equal(x, y) })
}
