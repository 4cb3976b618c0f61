package engine

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Outage is what one loop tells of its store's unavailability. A store
// that goes away (a restart, its connections taken, a lock, Redis down)
// fails every attempt of every loop; logged one line per attempt, that is
// hundreds of lines per outage, which drown what the operator needs: that
// the store went away, and when it came back. So the first failure of an
// outage logs one WARN, the rest of that outage only DEBUG, and the first
// success after it one INFO with the attempts and the duration.
//
// Fail also says how long the loop should back off: capped exponential
// with jitter, so that the processes of a cluster do not all retry at
// once against a store that is coming back. A success resets it.
//
// Succeed costs one atomic load while the store answers, so a loop may
// call it on every round of its hot path.
type Outage struct {
	log  *slog.Logger
	loop string
	min  time.Duration
	max  time.Duration

	// failing is set by any Fail and cleared by the next Succeed: the one
	// thing Succeed reads without the lock.
	failing atomic.Bool

	mu       sync.Mutex
	began    time.Time
	failures int           // unavailability failures of the open outage
	nominal  time.Duration // the next backoff before jitter
}

// Default bounds of an Outage's backoff.
const (
	DefaultOutageMinBackoff = 10 * time.Millisecond
	DefaultOutageMaxBackoff = 5 * time.Second
)

// NewOutage is an Outage for the loop named loop, logging to log, backing
// off from minBackoff (the loop's normal interval, typically) doubling up
// to maxBackoff. Zero or negative bounds take the defaults.
func NewOutage(log *slog.Logger, loop string, minBackoff, maxBackoff time.Duration) *Outage {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if minBackoff <= 0 {
		minBackoff = DefaultOutageMinBackoff
	}
	if maxBackoff <= 0 {
		maxBackoff = DefaultOutageMaxBackoff
	}
	maxBackoff = max(maxBackoff, minBackoff)
	return &Outage{log: log, loop: loop, min: minBackoff, max: maxBackoff, nominal: minBackoff}
}

// Fail records a failed attempt and returns how long to wait before the
// next: between half and all of the nominal backoff, which doubles with
// each failure up to the cap. The first failure of an outage logs a WARN
// with the loop, err and attrs (say, the queue); the others log at DEBUG.
// An error that is not StoreUnavailable (a refusal: the store answered)
// is not logged here, since the caller logs it as it always did, and
// opens no outage; it still grows the backoff, so a loop that meets it on
// every round does not spin.
func (o *Outage) Fail(err error, attrs ...any) time.Duration {
	unavailable := StoreUnavailable(err)
	o.mu.Lock()
	first := unavailable && o.failures == 0
	if first {
		o.began = time.Now()
	}
	if unavailable {
		o.failures++
	}
	n := o.failures
	d := o.nominal
	o.nominal = min(o.nominal*2, o.max)
	o.failing.Store(true)
	o.mu.Unlock()

	if unavailable {
		args := append([]any{"loop", o.loop, "err", err}, attrs...)
		if first {
			o.log.Warn("store unreachable", args...)
		} else {
			o.log.Debug("store still unreachable", append(args, "attempts", n)...)
		}
	}
	// Equal jitter: never below half the nominal delay, so the backoff
	// still grows; the random half spreads the retries of many loops.
	half := d / 2
	return half + rand.N(d-half+1)
}

// Succeed records a successful attempt; the first after an outage logs an
// INFO with the failed attempts and how long the outage lasted.
func (o *Outage) Succeed() {
	if !o.failing.Load() {
		return
	}
	o.mu.Lock()
	if !o.failing.Load() { // another goroutine closed it meanwhile
		o.mu.Unlock()
		return
	}
	n, began := o.failures, o.began
	o.failures, o.nominal = 0, o.min
	o.failing.Store(false)
	o.mu.Unlock()
	if n > 0 {
		o.log.Info("store reachable again", "loop", o.loop, "failed_attempts", n, "outage", time.Since(began).Round(time.Millisecond))
	}
}

// Down reports whether an outage is open: the store did not answer the
// last attempt, and none has succeeded since.
func (o *Outage) Down() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failures > 0
}

// sleepCtx waits d or until ctx ends; it reports false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// StoreUnavailable reports whether err says the store did not answer (a
// driver, network or timeout error, ErrClosed) rather than answered with a
// refusal the engine names (a lost lease, invalid input, a wrong state, a
// conflict...). Only the former opens an Outage; a refusal is logged as
// before, since it is about one job or one request, not the store.
func StoreUnavailable(err error) bool {
	if err == nil {
		return false
	}
	for _, s := range []error{
		ErrLeaseLost, ErrQuarantined, ErrNotFound, ErrConflict, ErrInvalid,
		ErrPayloadTooLarge, ErrInvalidTransition, ErrWrongState, ErrUnsupported,
		ErrIdempotencyInFlight, ErrIdempotencyMismatch,
	} {
		if errors.Is(err, s) {
			return false
		}
	}
	return true
}
