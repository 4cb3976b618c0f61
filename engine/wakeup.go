package engine

import (
	"github.com/sluicehq/sluice/backend"
)

// notifier is the store's Notifier when it declares CapabilityWakeups.
func (e *Engine) notifier() (backend.Notifier, bool) {
	return backend.NotifierOf(e.store)
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
