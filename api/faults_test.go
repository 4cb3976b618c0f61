package api

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Wrappers of the real engine for what it does not do on demand: a store
// that goes away for one call, a call that hangs or panics, a part of the
// operator surface the store lacks, an event stream that tells of a lost
// store. Each overrides one method; the rest is the engine's, so a server
// over one keeps the engine's idempotency store and its enqueue route.

// retryStoreAway answers Retry with engine.ErrClosed while away is set:
// the store is unreachable for that call and back after it.
type retryStoreAway struct {
	*engine.Engine
	away *atomic.Bool
}

func (r retryStoreAway) Retry(ctx context.Context, id string, o engine.RetryOptions) (*engine.Job, error) {
	if r.away.Load() {
		return nil, engine.ErrClosed
	}
	return r.Engine.Retry(ctx, id, o)
}

// retryHangs holds each Retry, once it has told entered, until release
// is closed or the caller gives up.
type retryHangs struct {
	*engine.Engine
	entered chan<- struct{}
	release <-chan struct{}
}

func (r retryHangs) Retry(ctx context.Context, id string, o engine.RetryOptions) (*engine.Job, error) {
	r.entered <- struct{}{}
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.Engine.Retry(ctx, id, o)
}

// queuesUnsupported answers Queues with engine.ErrUnsupported, as an
// engine over a store without that part of the operator surface does.
type queuesUnsupported struct{ *engine.Engine }

func (queuesUnsupported) Queues(context.Context) ([]engine.QueueInfo, error) {
	return nil, engine.ErrUnsupported
}

// queuesPanics panics in Queues: a bug in a read.
type queuesPanics struct{ *engine.Engine }

func (queuesPanics) Queues(context.Context) ([]engine.QueueInfo, error) { panic("boom") }

// pausePanics panics in PauseQueue: a bug in a mutation.
type pausePanics struct{ *engine.Engine }

func (pausePanics) PauseQueue(context.Context, string) error { panic("boom") }

// storeLost passes on the engine's event stream and, on cue, what the
// engine's stream says when its poll of the store fails and then works
// again (ChangeLost, ChangeResync), with an error text of the test's
// choosing: a real outage cannot choose it, and the tests check that the
// text crosses the wire intact.
type storeLost struct {
	*engine.Engine
	cue chan engine.Change
}

func newStoreLost(e *engine.Engine) storeLost {
	return storeLost{Engine: e, cue: make(chan engine.Change)}
}

func (s storeLost) Subscribe(ctx context.Context) (<-chan engine.Change, error) {
	in, err := s.Engine.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan engine.Change)
	go func() {
		defer close(out)
		for {
			var c engine.Change
			select {
			case c = <-s.cue:
			case ch, open := <-in:
				if !open {
					return
				}
				c = ch
			}
			select {
			case out <- c:
			case <-ctx.Done():
			}
		}
	}()
	return out, nil
}

// tell hands cs, in order, to the open stream, and fails t when no
// stream takes them within 5 s.
func (s storeLost) tell(t *testing.T, cs ...engine.Change) {
	t.Helper()
	for _, c := range cs {
		select {
		case s.cue <- c:
		case <-time.After(5 * time.Second):
			t.Fatalf("no event stream took %+v", c)
		}
	}
}

// countedStreams counts the engine's event streams open through it: the
// engine does not say how many subscriptions it holds, and a test of a
// stream's end needs to know that the server let go of its own.
type countedStreams struct {
	*engine.Engine
	open *atomic.Int32
}

func newCountedStreams(e *engine.Engine) countedStreams {
	return countedStreams{Engine: e, open: new(atomic.Int32)}
}

func (c countedStreams) Subscribe(ctx context.Context) (<-chan engine.Change, error) {
	in, err := c.Engine.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	out := make(chan engine.Change)
	go func() {
		defer close(out)
		// Counted until the engine closes its stream, which it does when
		// the subscriber's context ends.
		defer c.open.Add(-1)
		for ch := range in {
			select {
			case out <- ch:
			case <-ctx.Done():
			}
		}
	}()
	return out, nil
}

// waitOpen waits until n streams are open, and fails t when that has not
// happened within 5 s.
func (c countedStreams) waitOpen(t *testing.T, n int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.open.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d event streams open, want %d", c.open.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
