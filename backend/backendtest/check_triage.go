package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// triageChecks: error groups an operator closes. A group is resolved with
// a note and reopens by itself, saying when, once one of its jobs dies
// after the resolution; an ignored group's jobs still die, are archived
// and counted, but the default listing leaves it out until it is
// un-ignored. The store keeps verdicts alone: every status is read from
// the jobs, so these run through Control (the engine, or the HTTP client
// in the API's run).
func triageChecks() []check {
	return []check{
		{name: "ResolveWithNote", fn: testTriageResolve},
		{name: "NewDeathReopensAndSaysWhen", fn: testTriageReopen},
		{name: "IgnoredCountedButNotListed", fn: testTriageIgnore},
		{name: "UnknownGroupNotFound", fn: testTriageUnknown},
		{name: "ResolveRacingDeathsLosesNothing", fn: testTriageRace},
	}
}

// group finds the group of queue in the listing p asks for (nil: none).
func (f *ctlFixture) group(t *testing.T, p engine.ListErrorGroupsParams, queue string) *engine.ErrorGroup {
	t.Helper()
	gs, err := f.c.ListErrorGroups(f.ctx, p)
	if err != nil {
		t.Fatalf("ListErrorGroups: %v", err)
	}
	var found *engine.ErrorGroup
	for i := range gs {
		if gs[i].Queue != queue {
			continue
		}
		if found != nil {
			t.Fatalf("queue %s: two groups, %q and %q", queue, found.Pattern, gs[i].Pattern)
		}
		found = &gs[i]
	}
	return found
}

// mustGroup is group, failing when the listing holds none.
func (f *ctlFixture) mustGroup(t *testing.T, p engine.ListErrorGroupsParams, queue string) *engine.ErrorGroup {
	t.Helper()
	g := f.group(t, p, queue)
	if g == nil {
		t.Fatalf("queue %s: no error group listed", queue)
	}
	return g
}

func testTriageResolve(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "r", 3, "card declined for order %d")
	g := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing")
	if g.Status != engine.GroupOpen || g.ID != engine.ErrorGroupID(g.Queue, g.Kind, g.Pattern) || g.TriagedAt != nil {
		t.Fatalf("before triage: %+v", g)
	}
	got, err := f.c.ResolveErrorGroup(f.ctx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "fixed in deploy 42"})
	if err != nil {
		t.Fatalf("ResolveErrorGroup: %v", err)
	}
	if got.ID != g.ID || got.Status != engine.GroupResolved || got.Note != "fixed in deploy 42" || got.TriagedBy != "maya" ||
		got.TriagedAt == nil || got.ReopenedAt != nil {
		t.Fatalf("resolve answered %+v", got)
	}
	l := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing")
	if l.Status != engine.GroupResolved || l.Note != "fixed in deploy 42" || l.TriagedBy != "maya" ||
		l.TriagedAt == nil || !l.TriagedAt.Equal(*got.TriagedAt) || l.Count != 3 {
		t.Fatalf("listed after resolve: %+v", l)
	}
	// A resolution again replaces the note and the time; the group is
	// still there.
	first := *got.TriagedAt
	if got, err = f.c.ResolveErrorGroup(f.ctx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "really fixed"}); err != nil {
		t.Fatal(err)
	}
	if l := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing"); l.Note != "really fixed" || l.Status != engine.GroupResolved ||
		l.TriagedAt == nil || !l.TriagedAt.Equal(*got.TriagedAt) || got.TriagedAt.Before(first) {
		t.Fatalf("listed after a second resolve (the first at %v): %+v", first, l)
	}
}

func testTriageReopen(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "o", 2, "card declined for order %d")
	g := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing")
	res, err := f.c.ResolveErrorGroup(f.ctx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "fixed"})
	if err != nil {
		t.Fatal(err)
	}
	// The same failure again, after the resolution.
	ids := f.dead(t, "billing", "p", 2, "card declined for order 9%d")
	l := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing")
	if l.Status != engine.GroupReopened || l.Count != 4 || l.ReopenedAt == nil || l.Note != "fixed" {
		t.Fatalf("after a new death: %+v", l)
	}
	first := firstChanged(t, f, ids)
	if !l.ReopenedAt.Equal(first) || l.ReopenedAt.Before(*res.TriagedAt) {
		t.Fatalf("reopened at %v, want the first new death's %v (resolved at %v)", l.ReopenedAt, first, res.TriagedAt)
	}
	// Resolved again, it stays resolved until the next death.
	if _, err := f.c.ResolveErrorGroup(f.ctx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "fixed again"}); err != nil {
		t.Fatal(err)
	}
	if l := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing"); l.Status != engine.GroupResolved || l.ReopenedAt != nil {
		t.Fatalf("resolved again: %+v", l)
	}
}

// firstChanged is the earliest time the jobs ids entered their state.
func firstChanged(t *testing.T, f *ctlFixture, ids []string) time.Time {
	t.Helper()
	var first time.Time
	for _, id := range ids {
		d, err := f.c.GetJob(f.ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if first.IsZero() || d.Job.StateChangedAt.Before(first) {
			first = d.Job.StateChangedAt
		}
	}
	return first
}

func testTriageIgnore(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "i", 2, "card declined for order %d")
	f.dead(t, "email", "m", 1, "template not found")
	g := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing")
	got, err := f.c.IgnoreErrorGroup(f.ctx, engine.ErrorGroupIgnoreParams{ID: g.ID, Note: "a partner's sandbox"})
	if err != nil {
		t.Fatalf("IgnoreErrorGroup: %v", err)
	}
	if got.Status != engine.GroupIgnored || got.Note != "a partner's sandbox" {
		t.Fatalf("ignore answered %+v", got)
	}
	// New deaths of an ignored group are archived and counted as ever.
	ids := f.dead(t, "billing", "j", 3, "card declined for order 7%d")
	if l := f.group(t, engine.ListErrorGroupsParams{}, "billing"); l != nil {
		t.Fatalf("the default listing holds the ignored group: %+v", l)
	}
	if l := f.mustGroup(t, engine.ListErrorGroupsParams{}, "email"); l.Status != engine.GroupOpen {
		t.Fatalf("the other group: %+v", l)
	}
	all := f.mustGroup(t, engine.ListErrorGroupsParams{Ignored: true}, "billing")
	if all.Status != engine.GroupIgnored || all.Count != 5 || all.ID != g.ID {
		t.Fatalf("listed with the ignored: %+v", all)
	}
	// Its jobs are still reachable by filter, the new ones among them.
	listed := map[string]bool{}
	for _, j := range f.listAll(t, all.Selector, 50) {
		listed[j.ID] = true
	}
	for _, id := range ids {
		if !listed[id] {
			t.Fatalf("job %s of the ignored group is not listed by its selector %s (%v)", id, all.Selector.String(), listed)
		}
	}
	if len(listed) != 5 {
		t.Fatalf("the ignored group's selector lists %d jobs, want 5", len(listed))
	}
	un, err := f.c.UnignoreErrorGroup(f.ctx, engine.ErrorGroupUnignoreParams{ID: g.ID})
	if err != nil {
		t.Fatalf("UnignoreErrorGroup: %v", err)
	}
	if un.Status != engine.GroupOpen || un.Note != "" || un.TriagedAt != nil {
		t.Fatalf("unignore answered %+v", un)
	}
	if l := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing"); l.Status != engine.GroupOpen || l.Count != 5 {
		t.Fatalf("after unignore: %+v", l)
	}
}

func testTriageUnknown(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "billing", "u", 1, "card declined")
	const id = "0123456789abcdef"
	calls := map[string]func() error{
		"resolve": func() error {
			_, err := f.c.ResolveErrorGroup(f.ctx, engine.ErrorGroupResolveParams{ID: id, Note: "x"})
			return err
		},
		"ignore": func() error {
			_, err := f.c.IgnoreErrorGroup(f.ctx, engine.ErrorGroupIgnoreParams{ID: id})
			return err
		},
		"unignore": func() error {
			_, err := f.c.UnignoreErrorGroup(f.ctx, engine.ErrorGroupUnignoreParams{ID: id})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("%s of an unknown group: %v, want ErrNotFound", name, err)
		}
	}
	if l := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing"); l.Status != engine.GroupOpen {
		t.Fatalf("the known group after the refusals: %+v", l)
	}
}

// testTriageRace resolves a group while its jobs die. Whatever the order,
// every death is counted, and the group is reopened exactly when a job
// died at or after the resolution's time, at the first such death.
func testTriageRace(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	before := f.dead(t, "billing", "a", 2, "card declined for order %d")
	g := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing")
	const n = 20
	ps := make([]engine.EnqueueParams, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("race-%03d", i)
		ps[i] = engine.EnqueueParams{ID: ids[i], Queue: "billing", Kind: "fail", MaxAttempts: 1,
			Args: failPayload{I: i, Msg: fmt.Sprintf("card declined for order %d", 100+i)}}
	}
	var wg sync.WaitGroup
	var res *engine.ErrorGroup
	var resErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(5 * time.Millisecond)
		res, resErr = f.c.ResolveErrorGroup(f.ctx, engine.ErrorGroupResolveParams{ID: g.ID, Note: "during the storm"})
	}()
	if _, err := f.e.EnqueueMany(f.ctx, ps); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if resErr != nil {
		t.Fatalf("ResolveErrorGroup: %v", resErr)
	}
	for _, id := range ids {
		waitState(t, f.s, id, engine.StateArchived)
	}
	l := f.mustGroup(t, engine.ListErrorGroupsParams{}, "billing")
	if l.Count != int64(len(before)+n) {
		t.Fatalf("group counts %d jobs, want %d", l.Count, len(before)+n)
	}
	at := *res.TriagedAt
	var first time.Time
	for _, id := range ids {
		d, err := f.c.GetJob(f.ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if c := d.Job.StateChangedAt; !c.Before(at) && (first.IsZero() || c.Before(first)) {
			first = c
		}
	}
	switch {
	case first.IsZero() && l.Status != engine.GroupResolved:
		t.Fatalf("every death was before the resolution at %v, yet the group is %s (%+v)", at, l.Status, l)
	case !first.IsZero() && (l.Status != engine.GroupReopened || l.ReopenedAt == nil || !l.ReopenedAt.Equal(first)):
		t.Fatalf("a job died at %v, after the resolution at %v: group %+v", first, at, l)
	}
	t.Logf("resolution at %v; first death after it: %v; status %s", at, first, l.Status)
}
