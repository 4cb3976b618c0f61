package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// testReaper: an expired lease of a process that stopped heartbeating is a
// crash; one of a process that still heartbeats is released uncharged.
func testReaper(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	if err := s.WorkerHeartbeat(ctx, &backend.WorkerHeartbeatParams{ID: "ghost-alive", TTL: time.Hour}); err != nil {
		t.Fatalf("WorkerHeartbeat: %v", err)
	}
	for _, c := range []struct{ id, worker string }{{"dead", "ghost-dead"}, {"alive", "ghost-alive"}} {
		insert(t, s, jobParams(c.id, "q-"+c.id))
		js := claimP(t, s, backend.JobClaimParams{Queue: "q-" + c.id, WorkerID: c.worker, Limit: 1, LeaseDuration: 100 * time.Millisecond}).Jobs
		if len(js) != 1 {
			t.Fatalf("claim %s: %v", c.id, ids(js))
		}
	}
	// A maintenance-only engine: it reaps, and runs nothing.
	cfg := fast("reaper")
	cfg.CrashBackoff = func(int) time.Duration { return time.Hour } // keep the crashed job retryable
	// The reaper charges a crash only after an unbroken run of contact
	// (a heartbeat TTL and reconnectGrace), and any maintenance call
	// slower than a heartbeat interval breaks the run. With the suite's
	// 250 ms, -race on a loaded machine with the other checks running
	// breaks it every second or two (seen: no charge in 20 s); this check
	// is about what a charge and a release write, not about that wait.
	cfg.HeartbeatInterval = time.Second
	startEngine(t, s, cfg)

	dead := waitState(t, s, "dead", engine.StateRetryable)
	if dead.CrashAttempt != 1 || dead.Attempt != 0 || len(dead.Errors) != 1 || !dead.Errors[0].Crash {
		t.Fatalf("job of a dead worker: %s errors %+v, want one crash charged", describe(dead), dead.Errors)
	}
	checkLease(t, dead)
	if ev := events(t, s, "dead"); !hasEvent(ev, engine.EventCrashed) {
		t.Fatalf("dead worker's job: events %v, want crashed", eventKinds(ev))
	}
	// The crash entry says who ran the attempt (the dead worker), so the
	// timeline's claim derived from it is the dead worker's, not the
	// reaper's that wrote it.
	if w := dead.Errors[0].Worker; w != "ghost-dead" {
		t.Fatalf("crash entry of a dead worker's job: worker %q, want ghost-dead", w)
	}
	for _, ev := range engine.Timeline(dead, events(t, s, "dead")) {
		if ev.Kind == engine.EventClaimed && ev.Actor != "ghost-dead" {
			t.Fatalf("dead worker's job: claim credited to %q, want ghost-dead", ev.Actor)
		}
	}
	alive := waitState(t, s, "alive", engine.StateAvailable)
	if alive.CrashAttempt != 0 || alive.Attempt != 0 || len(alive.Errors) != 0 {
		t.Fatalf("job of a live worker: %s, want nothing charged", describe(alive))
	}
	checkLease(t, alive)
	if ev := events(t, s, "alive"); !hasEvent(ev, engine.EventLeaseLost) || hasEvent(ev, engine.EventCrashed) {
		t.Fatalf("live worker's job: events %v, want lease_lost and no crash", eventKinds(ev))
	}
}

// errStoreDown is what faultStore returns while the outage lasts.
var errStoreDown = errors.New("backendtest: store down")

// faultStore wraps a store; while down, every call fails with an error
// wrapping errStoreDown and reaches nothing. renewDown fails lease
// renewals only: a process that lives and beats but cannot keep its
// leases (a stalled renewer, a partition of one connection pool).
// renewFor, when set, is the lease a renewal gives instead of the
// engine's (nanoseconds); beatFor likewise the heartbeat's TTL, for the
// beats that reach the store once it is set.
//
// hold, when set, holds the reaper's reads and writes (expired leases
// listed, jobs finished) that reach the store holdAfter or more after
// the first call that passed once watch was set, until hold is closed.
type faultStore struct {
	backend.Store
	down      atomic.Bool
	renewDown atomic.Bool
	renewFor  atomic.Int64
	beatFor   atomic.Int64
	beats     atomic.Int64 // heartbeats with beatFor's TTL that reached the store
	watch     atomic.Bool
	backAt    atomic.Int64 // unix ns of the first call passed once watch was set
	hold      chan struct{}
	holdAfter time.Duration
	calls     atomic.Int64 // calls refused
	passed    atomic.Int64 // calls let through
}

var _ backend.Store = (*faultStore)(nil)

func (f *faultStore) fail(op string) error {
	if f.down.Load() || (op == "JobLeaseRenew" && f.renewDown.Load()) {
		f.calls.Add(1)
		return fmt.Errorf("%s: %w", op, errStoreDown)
	}
	if f.watch.Load() {
		f.backAt.CompareAndSwap(0, time.Now().UnixNano())
	}
	f.passed.Add(1)
	return nil
}

// held waits, for a reaper's call that passed, while hold says so.
func (f *faultStore) held(ctx context.Context) error {
	b := f.backAt.Load()
	if f.hold == nil || b == 0 || time.Since(time.Unix(0, b)) < f.holdAfter {
		return nil
	}
	select {
	case <-f.hold:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *faultStore) Now(ctx context.Context) (time.Time, error) {
	if err := f.fail("Now"); err != nil {
		return time.Time{}, err
	}
	return f.Store.Now(ctx)
}

func (f *faultStore) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) ([]backend.JobInsertResult, error) {
	if err := f.fail("JobInsertMany"); err != nil {
		return nil, err
	}
	return f.Store.JobInsertMany(ctx, p)
}

func (f *faultStore) JobGetByID(ctx context.Context, p *backend.JobGetByIDParams) (*engine.Job, error) {
	if err := f.fail("JobGetByID"); err != nil {
		return nil, err
	}
	return f.Store.JobGetByID(ctx, p)
}

func (f *faultStore) JobEventList(ctx context.Context, p *backend.JobEventListParams) ([]engine.Event, error) {
	if err := f.fail("JobEventList"); err != nil {
		return nil, err
	}
	return f.Store.JobEventList(ctx, p)
}

func (f *faultStore) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	if err := f.fail("JobClaim"); err != nil {
		return nil, err
	}
	return f.Store.JobClaim(ctx, p)
}

func (f *faultStore) JobCompleteMany(ctx context.Context, p *backend.JobCompleteManyParams) ([]error, error) {
	if err := f.fail("JobCompleteMany"); err != nil {
		return nil, err
	}
	return f.Store.JobCompleteMany(ctx, p)
}

func (f *faultStore) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*engine.Job, error) {
	if err := f.fail("JobFinish"); err != nil {
		return nil, err
	}
	if err := f.held(ctx); err != nil {
		return nil, err
	}
	return f.Store.JobFinish(ctx, p)
}

func (f *faultStore) JobLeaseRenew(ctx context.Context, p *backend.JobLeaseRenewParams) ([]error, error) {
	if err := f.fail("JobLeaseRenew"); err != nil {
		return nil, err
	}
	if d := time.Duration(f.renewFor.Load()); d > 0 {
		q := *p
		q.LeaseDuration = d
		p = &q
	}
	return f.Store.JobLeaseRenew(ctx, p)
}

func (f *faultStore) JobListExpiredLeases(ctx context.Context, p *backend.JobListExpiredLeasesParams) ([]backend.ExpiredLease, error) {
	if err := f.fail("JobListExpiredLeases"); err != nil {
		return nil, err
	}
	if err := f.held(ctx); err != nil {
		return nil, err
	}
	return f.Store.JobListExpiredLeases(ctx, p)
}

func (f *faultStore) JobScheduleDue(ctx context.Context, p *backend.JobScheduleDueParams) ([]string, error) {
	if err := f.fail("JobScheduleDue"); err != nil {
		return nil, err
	}
	return f.Store.JobScheduleDue(ctx, p)
}

func (f *faultStore) JobDeleteExpired(ctx context.Context, p *backend.JobDeleteExpiredParams) (int, error) {
	if err := f.fail("JobDeleteExpired"); err != nil {
		return 0, err
	}
	return f.Store.JobDeleteExpired(ctx, p)
}

func (f *faultStore) FingerprintGet(ctx context.Context, p *backend.FingerprintGetParams) (*engine.Fingerprint, error) {
	if err := f.fail("FingerprintGet"); err != nil {
		return nil, err
	}
	return f.Store.FingerprintGet(ctx, p)
}

func (f *faultStore) FingerprintList(ctx context.Context, p *backend.FingerprintListParams) ([]*engine.Fingerprint, error) {
	if err := f.fail("FingerprintList"); err != nil {
		return nil, err
	}
	return f.Store.FingerprintList(ctx, p)
}

func (f *faultStore) FingerprintRelease(ctx context.Context, p *backend.FingerprintReleaseParams) (int, error) {
	if err := f.fail("FingerprintRelease"); err != nil {
		return 0, err
	}
	return f.Store.FingerprintRelease(ctx, p)
}

func (f *faultStore) WorkerHeartbeat(ctx context.Context, p *backend.WorkerHeartbeatParams) error {
	// Read before the call passes: a TTL set once the store went down
	// reaches it only after it came back.
	ttl := time.Duration(f.beatFor.Load())
	if err := f.fail("WorkerHeartbeat"); err != nil {
		return err
	}
	if ttl > 0 {
		q := *p
		q.TTL = ttl
		p = &q
	}
	if err := f.Store.WorkerHeartbeat(ctx, p); err != nil {
		return err
	}
	if ttl > 0 {
		f.beats.Add(1)
	}
	return nil
}

func (f *faultStore) WorkerDelete(ctx context.Context, p *backend.WorkerDeleteParams) error {
	if err := f.fail("WorkerDelete"); err != nil {
		return err
	}
	return f.Store.WorkerDelete(ctx, p)
}

func (f *faultStore) LeaderAttempt(ctx context.Context, p *backend.LeaderAttemptParams) (bool, error) {
	if err := f.fail("LeaderAttempt"); err != nil {
		return false, err
	}
	return f.Store.LeaderAttempt(ctx, p)
}

func (f *faultStore) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	if err := f.fail("LeaderResign"); err != nil {
		return err
	}
	return f.Store.LeaderResign(ctx, p)
}

// testStoreOutage: a store outage longer than a lease and a heartbeat TTL
// charges no crash to a job whose process lived through it. After the
// outage the worker's renewals stay refused until the reaper has found
// the expired lease, so the path "lease expired, worker alive: release,
// charge nothing" is taken for sure, not only the one where the worker
// renews in time.
func testStoreOutage(t *testing.T, h Harness) { storeOutage(t, h, 0, false) }

// testStoreOutageLateReconnect: the same outage, but the worker's client
// reaches the store again a second after the reaper's does, as go-redis
// does once a pool's dials have all failed (it fails every call until a
// background dial, tried once a second, succeeds). The reaper must still
// wait for the living worker to beat again before charging anything.
func testStoreOutageLateReconnect(t *testing.T, h Harness) { storeOutage(t, h, time.Second, false) }

// testStoreOutageFreshReaper: the maintainer starts only as the store
// comes back, so it saw no outage (a process replacing a killed one, say,
// started the moment the server answered), and the worker's client
// reaches the store a second later. A reaper that trusted a heartbeat TTL
// from its own start would call the living worker dead.
func testStoreOutageFreshReaper(t *testing.T, h Harness) { storeOutage(t, h, time.Second, true) }

// storeOutage runs the outage; the worker's store comes back lag after
// the maintainer first reached it again. A fresh maintainer is started
// only when the store is back, instead of living through the outage.
func storeOutage(t *testing.T, h Harness, lag time.Duration, fresh bool) {
	base := h.NewStore(t)
	ws := &faultStore{Store: base} // the worker's connection
	// The maintainer's. Its reaper runs freely for lag after it is back,
	// while the worker cannot beat; then it is held until the worker has
	// beaten again (see below).
	ms := &faultStore{Store: base, hold: make(chan struct{}), holdAfter: lag}
	var unhold sync.Once
	defer unhold.Do(func() { close(ms.hold) }) // before the engines stop
	const lease = 500 * time.Millisecond

	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var runs atomic.Int64
	wcfg := fast("worker", "q")
	wcfg.LeaseDuration = lease
	wcfg.NoMaintenance = true
	w := newEngine(t, ws, wcfg, engine.Kind{Name: "k", Handler: func(ctx context.Context, _ *engine.Job) error {
		runs.Add(1)
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	mcfg := fast("maintainer")
	mcfg.LeaseDuration = lease
	start(t, w)
	if !fresh {
		startEngine(t, ms, mcfg)
	}

	enqueue(t, w, engine.EnqueueParams{ID: "out", Queue: "q", Kind: "k", MaxAttempts: 1})
	select {
	case <-started:
	case <-time.After(waitLong):
		t.Fatal("the handler never started")
	}
	// The outage: longer than two leases and the heartbeat TTL (3 beats),
	// for both engines.
	ws.renewDown.Store(true)
	ws.down.Store(true)
	ms.down.Store(true)
	// The worker's beats once it is back say it lives for an hour: the
	// one the reaper must wait for may not lapse again before the reaper
	// acts on it when the worker's loop stalls for most of a second.
	ws.beatFor.Store(int64(time.Hour))
	time.Sleep(max(2*lease, 3*wcfg.HeartbeatInterval) + 300*time.Millisecond)
	ms.watch.Store(true)
	ms.down.Store(false)
	if fresh {
		startEngine(t, ms, mcfg)
	}
	// The maintainer backs off through the outage; its contact (and so
	// the wait before it trusts a lapsed heartbeat) starts at its first
	// call that passes. Till lag after it, the reaper runs with the worker
	// unreachable and its heartbeat lapsed: a reaper that trusts its
	// contact too soon charges a crash then.
	eventually(t, waitLong, func() bool { return ms.backAt.Load() != 0 },
		"the maintainer to reach the store after the outage")
	if lag > 0 {
		time.Sleep(time.Until(time.Unix(0, ms.backAt.Load()).Add(lag)))
	}
	beats := ws.beats.Load()
	ws.down.Store(false)
	if ws.calls.Load() == 0 || (!fresh && ms.calls.Load() == 0) {
		t.Fatal("no call reached the store during the outage: the test proves nothing")
	}
	// From lag on, the reaper is held until the worker has beaten again.
	// A correct reaper does not trust its contact before lag (1 s at most)
	// has passed: it waits a heartbeat TTL and reconnectGrace, 2.25 s. So
	// the hold hides nothing it would do wrong; without it, a stall of
	// this goroutine past lag, or of the worker's first beat, for the rest
	// of that wait (about a second; -race on a loaded machine sees that)
	// let the reaper rightly call the silent worker dead.
	eventually(t, waitLong, func() bool { return ws.beats.Load() > beats }, "the worker to beat again")
	unhold.Do(func() { close(ms.hold) })
	// The store is back; the worker beats again but has not renewed. The
	// reaper must see a live worker behind the expired lease.
	eventually(t, waitLong, func() bool {
		ev := events(t, base, "out")
		if hasEvent(ev, engine.EventCrashed) || hasEvent(ev, engine.EventQuarantined) {
			t.Fatalf("events %v: a crash was charged to a living process", eventKinds(ev))
		}
		return hasEvent(ev, engine.EventLeaseLost)
	}, "the reaper to release the expired lease of the living worker")
	ws.renewDown.Store(false)
	close(release)

	j := waitState(t, base, "out", engine.StateCompleted)
	if j.CrashAttempt != 0 || j.Attempt != 0 {
		t.Fatalf("after the outage: %s, want no crash and no attempt charged", describe(j))
	}
	for _, er := range j.Errors {
		if er.Crash {
			t.Fatalf("a crash was recorded: %+v", er)
		}
	}
	if ev := events(t, base, "out"); hasEvent(ev, engine.EventCrashed) || hasEvent(ev, engine.EventQuarantined) {
		t.Fatalf("events %v: a crash was charged to a living process", eventKinds(ev))
	}
	if j.Fence < 2 {
		t.Fatalf("fence %d: the released job was never claimed again", j.Fence)
	}
	t.Logf("handler ran %d time(s); %d worker and %d maintainer calls refused", runs.Load(), ws.calls.Load(), ms.calls.Load())
}

// gateStore pauses the first JobListExpiredLeases that reports job id,
// after the store answered and before the caller sees the answer, until
// proceed is closed.
type gateStore struct {
	backend.Store
	id      string
	armed   atomic.Bool
	listed  chan struct{}
	proceed chan struct{}
	calls   atomic.Int64 // JobListExpiredLeases calls begun
}

func (g *gateStore) JobListExpiredLeases(ctx context.Context, p *backend.JobListExpiredLeasesParams) ([]backend.ExpiredLease, error) {
	g.calls.Add(1)
	xs, err := g.Store.JobListExpiredLeases(ctx, p)
	for _, x := range xs {
		if x.Job != nil && x.Job.ID == g.id && g.armed.CompareAndSwap(true, false) {
			close(g.listed)
			<-g.proceed
			break
		}
	}
	return xs, err
}

// testRenewedLeaseNotReaped: the reaper finds an expired lease, but the
// worker renews it before the reaper writes. The reaper's write must then
// change nothing: the worker holds a live lease and its job must not be
// handed to anyone else (nor charged a crash).
func testRenewedLeaseNotReaped(t *testing.T, h Harness) {
	base := h.NewStore(t)
	fs := &faultStore{Store: base}
	gs := &gateStore{Store: base, id: "race", listed: make(chan struct{}), proceed: make(chan struct{})}
	gs.armed.Store(true)
	const lease = 500 * time.Millisecond

	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var runs atomic.Int64
	wcfg := fast("worker", "q")
	wcfg.LeaseDuration = lease
	wcfg.NoMaintenance = true
	w := newEngine(t, fs, wcfg, engine.Kind{Name: "k", Handler: func(ctx context.Context, _ *engine.Job) error {
		runs.Add(1)
		select {
		case started <- struct{}{}:
		default:
		}
		<-release // ignores its context, as handlers may
		return nil
	}})
	start(t, w)
	proceeded := false
	defer func() {
		if !proceeded {
			close(gs.proceed)
		}
	}()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	mcfg := fast("maintainer")
	mcfg.LeaseDuration = lease
	startEngine(t, gs, mcfg)

	enqueue(t, w, engine.EnqueueParams{ID: "race", Queue: "q", Kind: "k"})
	select {
	case <-started:
	case <-time.After(waitLong):
		t.Fatal("the handler never started")
	}
	// The worker stalls on renewals (it still beats); its lease runs out
	// and the reaper finds it.
	fs.renewDown.Store(true)
	select {
	case <-gs.listed:
	case <-time.After(waitLong):
		t.Fatal("the reaper never listed the expired lease")
	}
	// Before the reaper writes, the worker renews: the lease is live again,
	// for an hour. With the engine's 500 ms the renewed lease would run
	// out again whenever the worker's renewals stall for a third of a
	// second (a loaded machine under -race sees longer), and the reaper
	// would then rightly take it: the check would fail for slowness.
	fs.renewFor.Store(int64(time.Hour))
	fs.renewDown.Store(false)
	eventually(t, waitLong, func() bool {
		j := tryJob(base, "race")
		return j != nil && j.Lease != nil && j.Lease.ExpiresAt.After(storeNow(t, base))
	}, "the worker to renew its lease")
	renewed := getJob(t, base, "race")
	c0 := gs.calls.Load()
	close(gs.proceed)
	proceeded = true
	// The reaper writes (or not); its next tick shows it is done.
	eventually(t, waitLong, func() bool { return gs.calls.Load() > c0 }, "the reaper's next tick")
	if j := getJob(t, base, "race"); j.State != engine.StateRunning || j.Fence != renewed.Fence || j.CrashAttempt != 0 {
		t.Errorf("the reaper took a lease the worker had renewed: %s (was %s), events %v",
			describe(j), describe(renewed), eventKinds(events(t, base, "race")))
	}
	close(release)

	j := waitState(t, base, "race", engine.StateCompleted)
	if j.Fence != renewed.Fence || runs.Load() != 1 || j.CrashAttempt != 0 {
		t.Fatalf("the reaper released a lease the worker had renewed: %s, handler ran %d times, events %v",
			describe(j), runs.Load(), eventKinds(events(t, base, "race")))
	}
}
