package outage

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// Outage is what one loop tells of its store's unavailability. A store
// that goes away (a restart, its connections taken, a lock, Redis down)
// fails every attempt of every loop; logged one line per attempt, that is
// hundreds of lines per outage, which drown what the operator needs: that
// the store went away, and when it came back. So the first failure of an
// outage logs one WARN, the rest of that outage only DEBUG, and its end
// one INFO with the failed attempts and the duration.
//
// An outage ends at the first success that comes a settle period after
// its last failure. A store going away rarely fails cleanly: while its
// connections are cut and refused, some attempts still get through on a
// connection that lives on, and ending the outage at each of them would
// log a WARN and an INFO per flap, which is the flood again.
//
// Fail also says how long the loop should back off: capped exponential
// with jitter, so that the processes of a cluster do not all retry at
// once against a store that is coming back. A success resets it.
//
// Succeed costs one atomic load while the store answers, so a loop may
// call it on every round of its hot path; only in the settle period after
// an outage does it take a lock.
type Outage struct {
	log    *slog.Logger
	loop   string
	min    time.Duration
	max    time.Duration
	settle time.Duration

	// failing is set by any Fail and cleared when the outage ends (or, for
	// refusals only, by the next Succeed): the one thing Succeed reads
	// without the lock.
	failing atomic.Bool

	mu       sync.Mutex
	began    time.Time     // the outage's first failure
	lastFail time.Time     // its latest
	upSince  time.Time     // the first success since lastFail; zero while failing
	failures int           // unavailability failures of the open outage
	nominal  time.Duration // the next backoff before jitter
}

// Options bound an Outage's backoff and set its settle period.
type Options struct {
	// MinBackoff is the first backoff, typically the loop's normal
	// interval; 0 means DefaultOutageMinBackoff.
	MinBackoff time.Duration
	// MaxBackoff caps it; 0 means DefaultOutageMaxBackoff.
	MaxBackoff time.Duration
	// Settle is how long after its last failure an outage ends at the
	// next success; 0 means DefaultOutageSettle, negative that the first
	// success ends it.
	Settle time.Duration
}

// Defaults of Options.
const (
	DefaultOutageMinBackoff = 10 * time.Millisecond
	DefaultOutageMaxBackoff = 5 * time.Second
	DefaultOutageSettle     = 5 * time.Second
)

// New is an Outage for the loop named loop, logging to log.
func New(log *slog.Logger, loop string, o Options) *Outage {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultOutageMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultOutageMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	switch {
	case o.Settle == 0:
		o.Settle = DefaultOutageSettle
	case o.Settle < 0:
		o.Settle = 0
	}
	return &Outage{log: log, loop: loop, min: o.MinBackoff, max: o.MaxBackoff, settle: o.Settle, nominal: o.MinBackoff}
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
	now := time.Now()
	o.mu.Lock()
	first := unavailable && o.failures == 0
	if first {
		o.began = now
	}
	if unavailable {
		o.failures++
		o.lastFail = now
		o.upSince = time.Time{}
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

// Succeed records a successful attempt. It resets the backoff; the first
// success a settle period after an outage's last failure ends it with an
// INFO: the failed attempts, and how long the store was away (from the
// first failure to the first success that stayed).
func (o *Outage) Succeed() {
	if !o.failing.Load() {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nominal = o.min
	if o.failures == 0 { // refusals only, or closed meanwhile
		o.failing.Store(false)
		return
	}
	if o.upSince.IsZero() {
		o.upSince = now
	}
	if now.Sub(o.lastFail) < o.settle {
		return
	}
	n, lasted := o.failures, o.upSince.Sub(o.began)
	o.failures = 0
	o.failing.Store(false)
	o.log.Info("store reachable again", "loop", o.loop, "failed_attempts", n, "outage", lasted.Round(time.Millisecond))
}

// Down reports whether the store did not answer the last attempt.
func (o *Outage) Down() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failures > 0 && o.upSince.IsZero()
}

// Sleep waits d or until ctx ends; it reports false when ctx ended.
func Sleep(ctx context.Context, d time.Duration) bool {
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
		sluicetype.ErrLeaseLost, sluicetype.ErrQuarantined, sluicetype.ErrNotFound, sluicetype.ErrConflict, sluicetype.ErrInvalid,
		sluicetype.ErrPayloadTooLarge, sluicetype.ErrInvalidTransition, sluicetype.ErrWrongState, sluicetype.ErrUnsupported,
		sluicetype.ErrIdempotencyInFlight, sluicetype.ErrIdempotencyMismatch, sluicetype.ErrDenied,
	} {
		if errors.Is(err, s) {
			return false
		}
	}
	return true
}
