package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// Limits: concurrency limits across processes, enforced at claim.

func limitChecks() []check {
	return []check{
		{name: "ClaimTakesOnlyRoom", fn: testLimitClaimRoom},
		{name: "ConcurrentClaimsShareTheRoom", fn: testLimitConcurrentClaims},
		{name: "FourEnginesKindLimitThree", fn: testLimitEngines},
		{name: "DeadProcessHoldsSlotUntilReaped", fn: testLimitDeadProcess},
		{name: "ConfigAndControlSetTheStoresLimits", fn: testLimitConfigControl},
		{name: "HeldJobStaysAvailableAndSaysWhy", fn: testLimitHeldBy},
		{name: "PartitionedClaimTakesRoomPerKey", fn: testLimitPartitionClaim},
		{name: "FourEnginesTwoPerCustomer", fn: testLimitPartitionEngines},
		{name: "RateClaimTakesStartsLeft", fn: testLimitRateClaim},
		{name: "FourEnginesRateTenPerSecond", fn: testLimitRateEngines},
		{name: "FreedSlotClaimsBeforeThePoll", fn: testLimitFreedSlot},
	}
}

func limitStore(t testing.TB, s backend.Store) backend.LimitStore {
	t.Helper()
	ls, err := backend.LimitStoreOf(s)
	if err != nil {
		t.Fatalf("every store keeps limits: %v", err)
	}
	return ls
}

func setLimit(t testing.TB, s backend.Store, scope sluicetype.LimitScope, name string, n int) {
	t.Helper()
	if err := limitStore(t, s).LimitSet(context.Background(), &backend.LimitSetParams{
		Scope: scope, Name: name, Concurrency: n, Actor: "maya"}); err != nil {
		t.Fatalf("LimitSet(%s %s %d): %v", scope, name, n, err)
	}
}

// kindsOf counts claimed jobs by kind.
func kindsOf(js []*engine.Job) map[string]int {
	out := map[string]int{}
	for _, j := range js {
		out[j.Kind]++
	}
	return out
}

// testLimitClaimRoom: a claim takes of a limited kind only what its limit
// leaves, of the other kinds as before, and within its queue's limit; a
// limit raised, lowered or removed holds at the next claim; LimitList
// counts what runs. A claim that takes all the room a limit leaves, less
// than it asked, says the limit bound it; one the queue cut short does
// not (a full limit may say either: see JobClaimResult.Bound).
func testLimitClaimRoom(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	var ps []*backend.JobInsertParams
	for i := range 6 {
		p := jobParams(fmt.Sprintf("lim-%d", i), "q")
		p.Kind = "charge"
		ps = append(ps, p)
	}
	for i := range 3 {
		ps = append(ps, jobParams(fmt.Sprintf("free-%d", i), "q"))
	}
	insert(t, s, ps...)
	setLimit(t, s, sluicetype.LimitKind, "charge", 2)
	kinds := map[string]int{"k": 1, "charge": 1}

	// bound: what Bound must say; "" where a store may say either.
	steps := []struct {
		name  string
		set   func()
		want  map[string]int
		bound string
	}{
		{"limit 2 of charge", func() {}, map[string]int{"charge": 2, "k": 3}, "true"},
		{"full", func() {}, map[string]int{}, ""},
		{"raised to 3", func() { setLimit(t, s, sluicetype.LimitKind, "charge", 3) }, map[string]int{"charge": 1}, "true"},
		{"queue limit 4 below the 6 running", func() {
			setLimit(t, s, sluicetype.LimitKind, "charge", 0)
			setLimit(t, s, sluicetype.LimitQueue, "q", 4)
		}, map[string]int{}, ""},
		{"queue limit removed", func() { setLimit(t, s, sluicetype.LimitQueue, "q", 0) }, map[string]int{"charge": 3}, "false"},
	}
	for _, st := range steps {
		st.set()
		res := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w1", Limit: 10, Kinds: kinds})
		if got := kindsOf(res.Jobs); fmt.Sprint(got) != fmt.Sprint(st.want) {
			t.Fatalf("%s: claimed %v, want %v", st.name, got, st.want)
		}
		if st.bound != "" && fmt.Sprint(res.Bound) != st.bound {
			t.Fatalf("%s: Bound %v, want %s", st.name, res.Bound, st.bound)
		}
	}
	// Room left over: a limit that covers the claim but leaves more room
	// than the queue has did not bind it; a queue's limit that leaves
	// less than asked, filled, did.
	more := []*backend.JobInsertParams{}
	for i := range 3 {
		p := jobParams(fmt.Sprintf("lim-more-%d", i), "q")
		p.Kind = "charge"
		more = append(more, p)
	}
	insert(t, s, more...)
	setLimit(t, s, sluicetype.LimitKind, "charge", 20)
	if res := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w1", Limit: 2, Kinds: kinds}); len(res.Jobs) != 2 || res.Bound {
		t.Fatalf("limit 20 with 9 running, claim of 2: took %d, Bound %v; want 2, false (the claim's own limit decided)", len(res.Jobs), res.Bound)
	}
	if res := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w1", Limit: 10, Kinds: kinds}); len(res.Jobs) != 1 || res.Bound || !res.Limited {
		t.Fatalf("limit 20 with 11 running, one job left: took %d, Bound %v, Limited %v; want 1, false, true (the queue ran short)", len(res.Jobs), res.Bound, res.Limited)
	}
	setLimit(t, s, sluicetype.LimitKind, "charge", 0)
	setLimit(t, s, sluicetype.LimitQueue, "q", 13)
	insert(t, s, jobParams("free-more-0", "q"), jobParams("free-more-1", "q"), jobParams("free-more-2", "q"))
	if res := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w1", Limit: 10, Kinds: kinds}); len(res.Jobs) != 1 || !res.Bound {
		t.Fatalf("queue limit 13 with 12 running, 3 waiting: took %d, Bound %v; want 1, true", len(res.Jobs), res.Bound)
	}
	setLimit(t, s, sluicetype.LimitQueue, "q", 0)

	setLimit(t, s, sluicetype.LimitKind, "charge", 5)
	ls, err := limitStore(t, s).LimitList(ctx)
	if err != nil {
		t.Fatalf("LimitList: %v", err)
	}
	if len(ls) != 1 || ls[0].Scope != sluicetype.LimitKind || ls[0].Name != "charge" || ls[0].Concurrency != 5 ||
		ls[0].Running != 9 || ls[0].UpdatedBy != "maya" || ls[0].UpdatedAt.IsZero() {
		t.Fatalf("LimitList = %+v, want kind charge 5 with 9 running, by maya", ls)
	}
	if err := limitStore(t, s).LimitSet(ctx, &backend.LimitSetParams{Scope: "tenant", Name: "x", Concurrency: 1}); err == nil {
		t.Fatalf("LimitSet with an unknown scope: no error")
	}
}

// testLimitConcurrentClaims: sixteen claims at once under one limit —
// of the one kind they name, and of their queue — take together exactly
// the room it leaves, round after round as it is raised; and a claim of
// the room leaves none. A store whose claims count the running jobs before
// the claim ahead of them committed takes more.
func testLimitConcurrentClaims(t *testing.T, h Harness) {
	s := h.NewStore(t)
	cases := []struct {
		name  string
		scope sluicetype.LimitScope
		limit string // the limit's name
		queue string
		kinds map[string]int
	}{
		{"kind", sluicetype.LimitKind, "charge", "billing", map[string]int{"charge": 1}},
		{"queue", sluicetype.LimitQueue, "mailer", "mailer", map[string]int{"k": 1, "other": 1}},
	}
	for _, c := range cases {
		var ps []*backend.JobInsertParams
		for i := range 200 {
			p := jobParams(fmt.Sprintf("%s-%03d", c.name, i), c.queue)
			if c.scope == sluicetype.LimitKind {
				p.Kind = c.limit
			}
			ps = append(ps, p)
		}
		insert(t, s, ps...)
		running := 0
		for round, limit := range []int{5, 13, 14, 40} {
			setLimit(t, s, c.scope, c.limit, limit)
			const claimers = 16
			took := make([]int, claimers)
			errs := make([]error, claimers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range claimers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					p := backend.JobClaimParams{Queue: c.queue, WorkerID: fmt.Sprintf("w%d", i), Limit: 3, Kinds: c.kinds,
						LeaseID: fmt.Sprintf("lease-%s-%d-%d", c.name, round, i), LeaseDuration: time.Hour}
					withDeadlinePlan(&p)
					res, err := s.JobClaim(context.Background(), &p)
					if err != nil {
						errs[i] = err
						return
					}
					took[i] = len(res.Jobs)
				}()
			}
			close(start)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("%s limit, round %d: JobClaim: %v", c.name, round, err)
			}
			sum := 0
			for _, n := range took {
				sum += n
			}
			if want := min(limit-running, claimers*3); sum != want {
				t.Fatalf("%s limit %d with %d running: %d claims at once took %d jobs (%v), want %d",
					c.name, limit, running, claimers, sum, took, want)
			}
			running += sum
		}
		res := claimP(t, s, backend.JobClaimParams{Queue: c.queue, WorkerID: "w-last", Limit: 3, Kinds: c.kinds})
		if len(res.Jobs) != 0 || !res.Limited {
			t.Fatalf("%s limit full: a claim took %d, Limited %v; want 0, true", c.name, len(res.Jobs), res.Limited)
		}
	}
}

// testLimitEngines: four engines of four slots each over one store run a
// kind limited to 3; the handlers record how many run at once: never more
// than 3. A kind without a limit in the same queue runs beside it.
func testLimitEngines(t *testing.T, h Harness) {
	s := h.NewStore(t)
	setLimit(t, s, sluicetype.LimitKind, "charge", 3)
	c := &runCounter{}
	// Long enough for the other engines' claims to overlap a run.
	charge := c.handler(20 * time.Millisecond)
	other := func(context.Context, *engine.Job) error { c.done.Add(1); return nil }
	var es []*engine.Engine
	for i := range 4 {
		cfg := fast(fmt.Sprintf("w-%d", i), "billing")
		cfg.LeaseDuration = 30 * time.Second
		es = append(es, startEngine(t, s, cfg, engine.Kind{Name: "charge", Handler: charge},
			engine.Kind{Name: "mail", Handler: other}))
	}
	const charges, mails = 40, 20
	var ps []engine.EnqueueParams
	for i := range charges {
		ps = append(ps, engine.EnqueueParams{Queue: "billing", Kind: "charge", Args: map[string]int{"i": i}})
	}
	for i := range mails {
		ps = append(ps, engine.EnqueueParams{Queue: "billing", Kind: "mail", Args: map[string]int{"i": i}})
	}
	if _, err := es[0].EnqueueMany(context.Background(), ps); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	eventually(t, waitLong, func() bool { return c.done.Load() == charges+mails }, "all %d jobs done", charges+mails)
	if m := c.most.Load(); m > 3 {
		t.Fatalf("%d charges ran at once under a limit of 3", m)
	}
	t.Logf("at most %d charges ran at once (limit 3)", c.most.Load())
}

// testLimitDeadProcess: a process that claimed under a limit and died
// keeps its slot while its job is running — past its lease's expiry too —
// until the reaper takes the job back; then the limit's slot runs it and
// the job waiting behind it.
func testLimitDeadProcess(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("held", "q"), jobParams("waiting", "q"))
	setLimit(t, s, sluicetype.LimitKind, "k", 1)
	first := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "dead", Limit: 10,
		LeaseDuration: 300 * time.Millisecond}).Jobs
	if len(first) != 1 {
		t.Fatalf("first claim took %v, want one job", ids(first))
	}
	expires := first[0].Lease.ExpiresAt
	if js := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w2", Limit: 10}).Jobs; len(js) != 0 {
		t.Fatalf("second claim took %v while the first job runs under a limit of 1", ids(js))
	}
	eventually(t, waitLong, func() bool {
		n, err := s.Now(ctx)
		return err == nil && n.After(expires)
	}, "the dead process's lease expires")
	// Expired but not reaped: the job is still running and still counted.
	if js := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w2", Limit: 10}).Jobs; len(js) != 0 {
		t.Fatalf("claim took %v past the lease's expiry, before the reaper", ids(js))
	}
	var ran atomic.Int64
	startEngine(t, s, fast("w-live", "q"), engine.Kind{Name: "k", Handler: func(context.Context, *engine.Job) error {
		ran.Add(1)
		return nil
	}})
	eventually(t, waitLong, func() bool {
		return getJob(t, s, "held").State == engine.StateCompleted && getJob(t, s, "waiting").State == engine.StateCompleted
	}, "both jobs completed after the reaper")
}

// testLimitConfigControl: Config.Limits are written to the store at Start,
// over what it held; Control.SetLimit changes and removes a limit, and
// another engine on the store lists what was set; a limit the store
// cannot hold is refused.
func testLimitConfigControl(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := engine.WithActor(context.Background(), "maya")
	setLimit(t, s, sluicetype.LimitKind, "charge", 9)
	cfg := fast("w-config", "billing")
	cfg.Limits = []engine.Limit{{Scope: engine.LimitKind, Name: "charge", Concurrency: 2},
		{Scope: engine.LimitQueue, Name: "billing", Concurrency: 7}}
	a := startEngine(t, s, cfg, engine.Kind{Name: "charge", Handler: func(context.Context, *engine.Job) error { return nil }})
	b := newEngine(t, s, fast("w-other"))
	list := func() string {
		ls, err := b.ListLimits(ctx)
		if err != nil {
			t.Fatalf("ListLimits: %v", err)
		}
		var out []string
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%s=%d", l, l.Concurrency))
		}
		return fmt.Sprint(out)
	}
	if got, want := list(), "[kind charge=2 queue billing=7]"; got != want {
		t.Fatalf("after Start: %s, want %s", got, want)
	}
	steps := []struct {
		scope engine.LimitScope
		name  string
		n     int
		want  string
	}{
		{engine.LimitKind, "charge", 4, "[kind charge=4 queue billing=7]"},
		{engine.LimitQueue, "billing", 0, "[kind charge=4]"},
		{engine.LimitKind, "mail", 1, "[kind charge=4 kind mail=1]"},
	}
	for _, st := range steps {
		if err := a.SetLimit(ctx, engine.Limit{Scope: st.scope, Name: st.name, Concurrency: st.n}); err != nil {
			t.Fatalf("SetLimit(%s %s %d): %v", st.scope, st.name, st.n, err)
		}
		if got := list(); got != st.want {
			t.Fatalf("after SetLimit(%s %s %d): %s, want %s", st.scope, st.name, st.n, got, st.want)
		}
	}
	ls, _ := b.ListLimits(ctx)
	if ls[0].UpdatedBy != "maya" {
		t.Fatalf("limit set by %q, want maya", ls[0].UpdatedBy)
	}
	for _, bad := range []struct {
		scope engine.LimitScope
		name  string
		n     int
		key   string
	}{{"tenant", "x", 1, ""}, {engine.LimitKind, "", 1, ""}, {engine.LimitKind, "charge", -1, ""},
		{engine.LimitQueue, "billing", 1, "customer"}, {engine.LimitKind, "charge", 1, "a.b"}} {
		if err := a.SetLimit(ctx, engine.Limit{Scope: bad.scope, Name: bad.name, Concurrency: bad.n, Key: bad.key}); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("SetLimit(%q %q %d per %q) = %v, want ErrInvalid", bad.scope, bad.name, bad.n, bad.key, err)
		}
	}
	if _, err := engine.New(s, engine.Config{Limits: []engine.Limit{{Scope: "tenant", Name: "x", Concurrency: 1}}}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("New with a limit of an unknown scope = %v, want ErrInvalid", err)
	}
}

// testLimitHeldBy: a job a full limit holds back stays available,
// uncharged, and its detail names the limit and its usage; with room
// again it names none.
func testLimitHeldBy(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	insert(t, s, jobParams("a-runs", "q"), jobParams("b-held", "q"))
	setLimit(t, s, sluicetype.LimitKind, "k", 1)
	if js := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w1", Limit: 10}).Jobs; len(js) != 1 || js[0].ID != "a-runs" {
		t.Fatalf("claim took %v, want [a-runs] (claim order: same time, by id)", ids(js))
	}
	e := newEngine(t, s, fast("w-view"))
	steps := []struct {
		name   string
		set    func()
		id     string
		state  engine.State
		wantBy string
	}{
		{"full", func() {}, "b-held", engine.StateAvailable, "limit kind k 1/1"},
		{"the running job", func() {}, "a-runs", engine.StateRunning, ""},
		{"queue full too: the first full limit", func() { setLimit(t, s, sluicetype.LimitQueue, "q", 1) }, "b-held", engine.StateAvailable, "limit kind k 1/1"},
		{"kind raised", func() { setLimit(t, s, sluicetype.LimitKind, "k", 2) }, "b-held", engine.StateAvailable, "limit queue q 1/1"},
		{"room", func() { setLimit(t, s, sluicetype.LimitQueue, "q", 0) }, "b-held", engine.StateAvailable, ""},
	}
	for _, st := range steps {
		st.set()
		d, err := e.GetJob(ctx, st.id, false)
		if err != nil {
			t.Fatalf("%s: GetJob(%s): %v", st.name, st.id, err)
		}
		if d.Job.State != st.state || d.HeldBy != st.wantBy || d.Job.Attempt != 0 || d.Job.CrashAttempt != 0 {
			t.Fatalf("%s: %s is %s held by %q (attempt %d, crashes %d), want %s held by %q, uncharged",
				st.name, st.id, d.Job.State, d.HeldBy, d.Job.Attempt, d.Job.CrashAttempt, st.state, st.wantBy)
		}
	}
}

// testLimitPartitionClaim: a kind's limit partitioned by a payload field
// holds per value of it (per customer); jobs without the field share the
// partition of "". One claim cannot take two jobs of a partition past its
// room. LimitList says the key and counts every partition's jobs.
func testLimitPartitionClaim(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	var ps []*backend.JobInsertParams
	for i, c := range []string{`"a"`, `"a"`, `"a"`, `"b"`, `"b"`, `"b"`, `7`, `7`, "", ""} {
		p := jobParams(fmt.Sprintf("p-%02d", i), "q")
		p.Payload = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		if c != "" {
			p.Payload = json.RawMessage(fmt.Sprintf(`{"i":%d,"customer":%s}`, i, c))
		}
		ps = append(ps, p)
	}
	insert(t, s, ps...)
	if err := limitStore(t, s).LimitSet(ctx, &backend.LimitSetParams{Scope: sluicetype.LimitKind, Name: "k",
		Concurrency: 1, Key: "customer"}); err != nil {
		t.Fatalf("LimitSet: %v", err)
	}
	customers := func(js []*engine.Job) string {
		n := map[string]int{}
		for _, j := range js {
			var p struct{ Customer any }
			full := getJob(t, s, j.ID)
			if err := json.Unmarshal(full.Payload, &p); err != nil {
				t.Fatal(err)
			}
			n[fmt.Sprint(p.Customer)]++
		}
		return fmt.Sprint(n)
	}
	steps := []struct {
		name string
		n    int
		want string
	}{
		{"one per customer", 1, "map[7:1 <nil>:1 a:1 b:1]"},
		{"full", 1, "map[]"},
		{"raised to 2", 2, "map[7:1 <nil>:1 a:1 b:1]"},
		{"raised to 3", 3, "map[a:1 b:1]"},
	}
	for _, st := range steps {
		if err := limitStore(t, s).LimitSet(ctx, &backend.LimitSetParams{Scope: sluicetype.LimitKind, Name: "k",
			Concurrency: st.n, Key: "customer"}); err != nil {
			t.Fatalf("LimitSet: %v", err)
		}
		js := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w1", Limit: 20}).Jobs
		if got := customers(js); got != st.want {
			t.Fatalf("%s: claimed %s, want %s", st.name, got, st.want)
		}
	}
	ls, err := limitStore(t, s).LimitList(ctx)
	if err != nil || len(ls) != 1 || ls[0].Key != "customer" || ls[0].Concurrency != 3 || ls[0].Running != 10 {
		t.Fatalf("LimitList = %+v, %v; want kind k 3 per customer, 10 running", ls, err)
	}
}

// testLimitPartitionEngines: four engines run a kind limited to 2 per
// customer; the handlers record how many of each customer's jobs run at
// once: never more than 2.
func testLimitPartitionEngines(t *testing.T, h Harness) {
	s := h.NewStore(t)
	if err := limitStore(t, s).LimitSet(context.Background(), &backend.LimitSetParams{Scope: sluicetype.LimitKind,
		Name: "charge", Concurrency: 2, Key: "customer"}); err != nil {
		t.Fatalf("LimitSet: %v", err)
	}
	const customers, each = 3, 12
	var now, most [customers]atomic.Int64
	var done atomic.Int64
	charge := func(ctx context.Context, j *engine.Job) error {
		var p struct{ Customer int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return err
		}
		n := now[p.Customer].Add(1)
		for m := most[p.Customer].Load(); n > m && !most[p.Customer].CompareAndSwap(m, n); m = most[p.Customer].Load() {
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		now[p.Customer].Add(-1)
		done.Add(1)
		return nil
	}
	var es []*engine.Engine
	for i := range 4 {
		cfg := fast(fmt.Sprintf("w-%d", i), "billing")
		cfg.LeaseDuration = 30 * time.Second
		es = append(es, startEngine(t, s, cfg, engine.Kind{Name: "charge", Handler: charge}))
	}
	var ps []engine.EnqueueParams
	for i := range customers * each {
		ps = append(ps, engine.EnqueueParams{Queue: "billing", Kind: "charge", Args: map[string]int{"customer": i % customers, "i": i}})
	}
	if _, err := es[0].EnqueueMany(context.Background(), ps); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	eventually(t, waitLong, func() bool { return done.Load() == customers*each }, "all jobs done")
	for c := range customers {
		if m := most[c].Load(); m > 2 {
			t.Fatalf("customer %d: %d jobs ran at once under a limit of 2 per customer", c, m)
		}
		t.Logf("customer %d: at most %d at once (limit 2)", c, most[c].Load())
	}
}

// testLimitRateClaim: a rate limit (here per minute, so that no check
// waits on it) lets a claim start only what the window leaves; a raised
// rate starts more; a queue's rate caps every kind of it; LimitList says
// the starts in the window.
func testLimitRateClaim(t *testing.T, h Harness) {
	s := h.NewStore(t)
	ctx := context.Background()
	var ps []*backend.JobInsertParams
	for i := range 10 {
		ps = append(ps, jobParams(fmt.Sprintf("r-%02d", i), "q"))
	}
	insert(t, s, ps...)
	set := func(scope sluicetype.LimitScope, name string, rate int) {
		t.Helper()
		if err := limitStore(t, s).LimitSet(ctx, &backend.LimitSetParams{Scope: scope, Name: name,
			Rate: rate, RateWindow: time.Minute}); err != nil {
			t.Fatalf("LimitSet: %v", err)
		}
	}
	steps := []struct {
		name string
		set  func()
		want int
	}{
		{"3 a minute", func() { set(sluicetype.LimitKind, "k", 3) }, 3},
		{"none left", func() {}, 0},
		{"raised to 5", func() { set(sluicetype.LimitKind, "k", 5) }, 2},
		{"queue rate 1 a minute", func() { set(sluicetype.LimitKind, "k", 0); set(sluicetype.LimitQueue, "q", 1) }, 1},
		{"queue rate spent", func() {}, 0},
	}
	for _, st := range steps {
		st.set()
		if js := claimP(t, s, backend.JobClaimParams{Queue: "q", WorkerID: "w1", Limit: 20}).Jobs; len(js) != st.want {
			t.Fatalf("%s: claimed %d, want %d", st.name, len(js), st.want)
		}
	}
	ls, err := limitStore(t, s).LimitList(ctx)
	if err != nil || len(ls) != 1 || ls[0].Scope != sluicetype.LimitQueue || ls[0].Rate != 1 || ls[0].RateWindow != time.Minute ||
		ls[0].Starts != 1 || ls[0].Concurrency != 0 {
		t.Fatalf("LimitList = %+v, %v; want queue q 1 a minute, 1 start", ls, err)
	}
}

// testLimitRateEngines: four engines start a kind limited to 10 starts a
// second; by the store's clock (each job's attempted_at, the clock the
// limit counts by) no second-long window holds more than 10 starts —
// tolerance none.
func testLimitRateEngines(t *testing.T, h Harness) {
	s := h.NewStore(t)
	if err := limitStore(t, s).LimitSet(context.Background(), &backend.LimitSetParams{Scope: sluicetype.LimitKind,
		Name: "charge", Rate: 10, RateWindow: time.Second}); err != nil {
		t.Fatalf("LimitSet: %v", err)
	}
	const total = 35
	var mu sync.Mutex
	var starts []time.Time
	charge := func(_ context.Context, j *engine.Job) error {
		mu.Lock()
		starts = append(starts, *j.AttemptedAt)
		mu.Unlock()
		return nil
	}
	var es []*engine.Engine
	for i := range 4 {
		cfg := fast(fmt.Sprintf("w-%d", i), "billing")
		cfg.LeaseDuration = 30 * time.Second
		es = append(es, startEngine(t, s, cfg, engine.Kind{Name: "charge", Handler: charge}))
	}
	var ps []engine.EnqueueParams
	for i := range total {
		ps = append(ps, engine.EnqueueParams{Queue: "billing", Kind: "charge", Args: map[string]int{"i": i}})
	}
	if _, err := es[0].EnqueueMany(context.Background(), ps); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	eventually(t, waitLong, func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) == total }, "all jobs started")
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range starts {
		n := 0
		for j := i; j < len(starts) && starts[j].Sub(starts[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	if most > 10 {
		t.Fatalf("%d starts within one second under a rate of 10 a second", most)
	}
	t.Logf("at most %d starts in any second (rate 10/s); %d starts over %s", most, total, starts[len(starts)-1].Sub(starts[0]))
}

// testLimitFreedSlot: a kind limited to 2 in a queue of 8 slots whose
// poll is an hour away: each job that ends frees a place under the limit
// and its process claims again then, so all 30 run — 2 at a time — long
// before the poll. A process that waited for its poll after a claim the
// limit cut short would run 2 and stop.
func testLimitFreedSlot(t *testing.T, h Harness) {
	s := h.NewStore(t)
	setLimit(t, s, sluicetype.LimitKind, "charge", 2)
	c := &runCounter{}
	charge := c.handler(5 * time.Millisecond)
	cfg := fast("w-freed", "billing")
	cfg.Queues["billing"] = engine.QueueConfig{Concurrency: 8}
	cfg.PollInterval = time.Hour
	e := newEngine(t, s, cfg, engine.Kind{Name: "charge", Handler: charge})
	const total = 30
	var ps []engine.EnqueueParams
	for i := range total {
		ps = append(ps, engine.EnqueueParams{Queue: "billing", Kind: "charge", Args: map[string]int{"i": i}})
	}
	// Enqueued before the start: no wake-up from the enqueue reaches the
	// worker; only its first claim and its freed slots make it claim.
	if _, err := e.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	start(t, e)
	eventually(t, waitLong, func() bool { return c.done.Load() == total }, "all %d jobs done before the poll", total)
	if m := c.most.Load(); m > 2 {
		t.Fatalf("%d charges ran at once under a limit of 2", m)
	}
}

// runCounter counts a limited kind's runs: how many at once now, the
// most at once, and how many ended — a side table the handlers keep.
type runCounter struct{ now, most, done atomic.Int64 }

// handler is a handler that runs for work (or until cancelled) and counts.
func (c *runCounter) handler(work time.Duration) engine.Handler {
	return func(ctx context.Context, _ *engine.Job) error {
		n := c.now.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
		select {
		case <-time.After(work):
		case <-ctx.Done():
		}
		c.now.Add(-1)
		c.done.Add(1)
		return nil
	}
}
