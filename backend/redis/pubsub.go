package redis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/outage"
)

// Cross-process wake-ups: pub/sub on the namespace's channel {ns}:wake.
//
// Every write that makes jobs available (inserts, due jobs, operator
// retries and releases, retries with input, released fingerprints,
// resumed queues, bulk batches) publishes one message right after its
// script, naming the queues that got work (one per line; empty for
// "every queue"): one per batch, not one per job. A publish that fails
// costs nothing but latency, since the engine's poll is the fallback, so
// it never fails the write. The listener holds one pub/sub connection;
// when it drops it resubscribes with backoff, logs once per outage
// (outage.Outage), and on coming back wakes every queue, since messages
// published meanwhile are lost.

var _ backend.Notifier = (*Store)(nil)

// wakeChannel is the namespace's channel. Hash-tagged like every key, so
// a sharded pub/sub could keep it in the namespace's slot.
func (s *Store) wakeChannel() string { return s.prefix + "wake" }

// publishWake tells every process that queues got work; "" alone, or no
// queue at all, is every queue.
func (s *Store) publishWake(ctx context.Context, queues ...string) {
	msg := strings.Join(dedupe(queues), "\n")
	if err := s.c.Publish(context.WithoutCancel(ctx), s.wakeChannel(), msg).Err(); err != nil {
		s.log.Debug("redis: wake-up not published; workers poll", "store", s.url, "err", err)
	}
}

func dedupe(qs []string) []string {
	seen := make(map[string]bool, len(qs))
	out := qs[:0:0]
	for _, q := range qs {
		if q == "" {
			return nil // every queue
		}
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	return out
}

// wakeHub runs the subscription; fan fans its messages out.
type wakeHub struct {
	s   *Store
	fan *backend.WakeFanout

	mu sync.Mutex
	// ps is the live subscription, closed by close to end a blocked read;
	// closing stops a new one from starting meanwhile.
	ps      *goredis.PubSub
	closing bool
}

func newWakeHub(s *Store) *wakeHub {
	h := &wakeHub{s: s}
	h.fan = backend.NewWakeFanout(h.run)
	return h
}

// Wakeups returns a channel that receives the name of each queue that got
// work in any process ("" for every queue), until ctx ends (see
// backend.Notifier and backend.WakeFanout). The first call starts the
// subscription.
func (s *Store) Wakeups(ctx context.Context) <-chan string {
	if s.wake == nil {
		return make(chan string)
	}
	return s.wake.fan.Subscribe(ctx)
}

func (h *wakeHub) publish(queue string) { h.fan.Publish(queue) }

// close ends a blocked read first (the subscription's connection), then
// the listener.
func (h *wakeHub) close() {
	h.mu.Lock()
	h.closing = true
	if h.ps != nil {
		h.ps.Close()
	}
	h.mu.Unlock()
	h.fan.Close()
}

// run subscribes until ctx ends, resubscribing with backoff.
func (h *wakeHub) run(ctx context.Context) {
	out := outage.New(h.s.log, "redis wake-up listener", outage.Options{MinBackoff: 100 * time.Millisecond})
	for ctx.Err() == nil {
		err := h.listen(ctx, out)
		if ctx.Err() != nil {
			return
		}
		if !outage.StoreUnavailable(err) {
			// A refusal is no outage to Outage, but still no listener.
			err = errors.Join(errListenerDown, err)
		}
		if !sleep(ctx, out.Fail(err, "store", h.s.url)) {
			return
		}
	}
}

// errListenerDown marks a listener failure the server answered.
var errListenerDown = errors.New("redis: wake-up listener down")

// listen subscribes and delivers messages until an error.
func (h *wakeHub) listen(ctx context.Context, out *outage.Outage) error {
	ps := h.s.c.Subscribe(ctx, h.s.wakeChannel())
	defer ps.Close()
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return ctx.Err()
	}
	h.ps = ps
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.ps = nil
		h.mu.Unlock()
	}()
	// The confirmation proves the subscription is live before anything
	// that happened meanwhile is called lost.
	if _, err := ps.Receive(ctx); err != nil {
		return err
	}
	if out.Down() {
		h.publish("") // messages published while down are lost
	}
	out.Succeed()
	for {
		msg, err := ps.ReceiveTimeout(ctx, idleCheck)
		if isTimeout(err) {
			// Quiet for a while: make sure the connection still lives.
			if err := ps.Ping(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		m, ok := msg.(*goredis.Message)
		if !ok {
			continue // pong, (un)subscription confirmations
		}
		if m.Payload == "" {
			h.publish("")
			continue
		}
		for q := range strings.SplitSeq(m.Payload, "\n") {
			h.publish(q)
		}
	}
}

// idleCheck is how long the listener waits in silence before it pings.
const idleCheck = 30 * time.Second

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
