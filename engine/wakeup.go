package engine

import "context"

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

// notifier is the store's Notifier when it declares CapabilityWakeups.
func (e *Engine) notifier() (Notifier, bool) {
	if !Declares(e.store, CapabilityWakeups) {
		return nil, false
	}
	n, ok := e.store.(Notifier)
	return n, ok
}

// startWakeups wakes this process's idle runners when any process gives
// their queue work, instead of letting them wait out the poll interval.
// Called by Start when the engine has queues. It subscribes before it
// returns, so a write after Start is heard once the store's listener is
// up.
func (e *Engine) startWakeups() {
	n, ok := e.notifier()
	if !ok {
		return
	}
	ch := n.Wakeups(e.runCtx)
	e.spawn(func() { e.wakeupLoop(ch) })
}

func (e *Engine) wakeupLoop(ch <-chan string) {
	for {
		select {
		case <-e.runCtx.Done():
			return
		case q := <-ch:
			if q == "" {
				e.wakeAll()
			} else {
				e.wake(q)
			}
		}
	}
}

// remoteChange is what Subscribe reports for a wake-up: jobs of queue q
// (every queue when q is "") became available, in this process or
// another.
func remoteChange(q string) Change {
	return Change{Kind: ChangeJob, Queue: q, State: StateAvailable}
}
