package backend

import (
	"context"
	"sync"
)

// Notifier is what a store declaring CapabilityWakeups offers: a stream of
// cross-process wake-ups.
//
// Wakeups returns a channel that receives, until ctx ends, the name of
// each queue that got work in any process (inserts, due jobs, retries,
// releases, a resumed queue), or "" for every queue. A store sends at most
// one notification per batch it writes, never blocks on a slow reader (a
// full channel may collapse names into ""), and sends "" when its
// listener comes back after losing its connection, since notifications
// sent meanwhile are lost. The engine's poll interval stays the fallback,
// so a lost notification only delays work.
type Notifier interface {
	Wakeups(ctx context.Context) <-chan string
}

// WakeFanout hands the wake-ups of one store listener to every channel
// its Wakeups calls returned, for stores implementing Notifier. The
// listener (run) starts with the first Subscribe and ends with Close;
// sends never block: a full channel makes room and says "" (every queue),
// so a wake-up is never lost, only its name.
type WakeFanout struct {
	run func(ctx context.Context)

	mu      sync.Mutex
	subs    map[chan string]struct{}
	started bool
	closed  bool
	stop    context.CancelFunc
	done    chan struct{}
}

// NewWakeFanout returns a fan-out whose listener is run: it runs until
// its ctx ends, calling Publish for each wake-up it hears.
func NewWakeFanout(run func(ctx context.Context)) *WakeFanout {
	return &WakeFanout{run: run, subs: map[chan string]struct{}{}, done: make(chan struct{})}
}

// Subscribe returns a channel of wake-ups until ctx ends; after Close, a
// channel that never receives.
func (f *WakeFanout) Subscribe(ctx context.Context) <-chan string {
	ch := make(chan string, 16)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ch
	}
	f.subs[ch] = struct{}{}
	if !f.started {
		f.started = true
		lctx, cancel := context.WithCancel(context.Background())
		f.stop = cancel
		go func() {
			defer close(f.done)
			f.run(lctx)
		}()
	}
	f.mu.Unlock()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}()
	return ch
}

// Publish sends queue ("" for every queue) to every subscriber.
func (f *WakeFanout) Publish(queue string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- queue:
		default:
			select {
			case <-ch:
			default:
			}
			select {
			case ch <- "":
			default:
			}
		}
	}
}

// Close stops the listener and waits for it to return. Call it after
// whatever unblocks the listener's read (closing its connection), or rely
// on the listener honouring its ctx.
func (f *WakeFanout) Close() {
	f.mu.Lock()
	started, stop := f.started, f.stop
	f.closed = true
	f.mu.Unlock()
	if started {
		stop()
		<-f.done
	}
}
