package engine

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Error groups an operator closes: resolved (with a note) or ignored. The
// store keeps the verdicts alone (backend.ErrorGroupTriage); everything
// else is read here, from the jobs, when the groups are listed. A
// resolved group in which a job died after the resolution reads as
// reopened, with the first such death's time: no death writes a verdict,
// so no worker updates a row every other one does, and a death racing a
// resolution cannot be lost between them: it is either before the
// verdict's time (counted, the group resolved) or after (the group
// reopened).

// MaxErrorGroupNote is the longest note, in characters, a resolution or an
// ignore takes.
const MaxErrorGroupNote = 1000

// ListErrorGroupsParams asks ListErrorGroups for the error groups of the
// dead jobs Filter matches (of the archived ones when it names no state).
type ListErrorGroupsParams struct {
	Filter Filter
	// Ignored takes in the groups an operator ignored, which the default
	// listings (the console's :errors, `sluice errors list`, the metrics'
	// open groups) leave out.
	Ignored bool
}

// ErrorGroupResolveParams resolves the error group ID (ErrorGroup.ID).
type ErrorGroupResolveParams struct {
	ID   string
	Note string
}

// ErrorGroupIgnoreParams ignores the error group ID.
type ErrorGroupIgnoreParams struct {
	ID   string
	Note string
}

// ErrorGroupUnignoreParams brings the ignored error group ID back to the
// default listings, open.
type ErrorGroupUnignoreParams struct {
	ID string
}

// errorGroupLookupLimit bounds the groups read to find one by id: every
// group of the dead jobs, in practice.
const errorGroupLookupLimit = 1 << 20

// ErrorGroups groups dead jobs by kind and normalised error, leaving out
// the groups an operator ignored.
func (e *Engine) ErrorGroups(ctx context.Context, f Filter) ([]ErrorGroup, error) {
	return e.ListErrorGroups(ctx, ListErrorGroupsParams{Filter: f})
}

// ListErrorGroups groups dead jobs by kind and normalised error, each
// group with its triage status, the ignored ones only when asked.
func (e *Engine) ListErrorGroups(ctx context.Context, p ListErrorGroupsParams) ([]ErrorGroup, error) {
	f := p.Filter
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if len(f.States) == 0 {
		f.States = deadStates
	}
	if err := e.resolveExpiry(ctx, &f); err != nil {
		return nil, err
	}
	groups, err := e.store.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{Filter: storeFilter(f), Limit: 200})
	if err != nil {
		return nil, fmt.Errorf("error groups: %w", err)
	}
	verdicts, err := e.triageByKey(ctx)
	if err != nil {
		return nil, err
	}
	plain := plainDeadFilter(f)
	out := groups[:0]
	for i := range groups {
		g := &groups[i]
		g.Selector = groupSelector(f, g)
		v := verdicts[triageKey{g.Queue, g.Kind, g.Pattern}]
		// Under a filter of the archived jobs and no more, a group whose
		// newest death is older than its resolution did not come back:
		// no read needed.
		quiet := plain && v != nil && g.LastSeen.Before(v.At)
		if err := e.applyTriage(ctx, g, v, quiet); err != nil {
			return nil, err
		}
		if g.Status == GroupIgnored && !p.Ignored {
			continue
		}
		out = append(out, *g)
	}
	countNearSingletons(out)
	return out, nil
}

// triageKey names an error group in the store's verdicts.
type triageKey struct{ queue, kind, pattern string }

// triageByKey reads every verdict, by group.
func (e *Engine) triageByKey(ctx context.Context) (map[triageKey]*backend.ErrorGroupTriage, error) {
	ts, err := e.store.ErrorGroupTriageList(ctx)
	if err != nil {
		return nil, fmt.Errorf("error groups: verdicts: %w", err)
	}
	m := make(map[triageKey]*backend.ErrorGroupTriage, len(ts))
	for i := range ts {
		m[triageKey{ts[i].Queue, ts[i].Kind, ts[i].Pattern}] = &ts[i]
	}
	return m, nil
}

// plainDeadFilter reports whether f selects the archived jobs of some
// queues and kinds and nothing narrower, so that a group's LastSeen under
// it is its newest death.
func plainDeadFilter(f Filter) bool {
	rest := f
	rest.States, rest.Queues, rest.Kinds = nil, nil, nil
	return slices.Equal(f.States, deadStates) && rest.String() == ""
}

// applyTriage sets g's id and status from its verdict v (nil: open). A
// resolved group is reopened when one of its jobs died after the
// resolution; quiet says none did, known without reading.
func (e *Engine) applyTriage(ctx context.Context, g *ErrorGroup, v *backend.ErrorGroupTriage, quiet bool) error {
	g.ID = sluicetype.ErrorGroupID(g.Queue, g.Kind, g.Pattern)
	g.Status, g.Note, g.TriagedBy, g.TriagedAt, g.ReopenedAt = GroupOpen, "", "", nil, nil
	if v == nil {
		return nil
	}
	at := v.At
	g.Status, g.Note, g.TriagedBy, g.TriagedAt = v.Status, v.Note, v.Actor, &at
	if v.Status != GroupResolved || quiet {
		return nil
	}
	first, err := e.firstDeathAfter(ctx, g, at)
	if err != nil {
		return err
	}
	if first != nil {
		g.Status, g.ReopenedAt = GroupReopened, first
	}
	return nil
}

// firstDeathAfter is the time the first job of g died at after at (nil:
// none did): one keyset row, oldest first past at, so its cost does not
// grow with the group. A death at the resolution's very time counts as
// after it: a tie reopens rather than hides.
func (e *Engine) firstDeathAfter(ctx context.Context, g *ErrorGroup, at time.Time) (*time.Time, error) {
	rows, err := e.store.JobListPage(ctx, &backend.JobListPageParams{
		Filter:  Filter{States: deadStates, Queues: []string{g.Queue}, Kinds: []string{g.Kind}, ErrorPattern: g.Pattern},
		After:   &sluicetype.Cursor{At: at},
		Reverse: true,
		Limit:   1,
	})
	if err != nil {
		return nil, fmt.Errorf("error group %s: deaths since its resolution: %w", g.ID, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	t := rows[0].StateChangedAt
	return &t, nil
}

// findErrorGroup finds the group id names among the groups of the dead
// jobs and those with a verdict (whose jobs may all be gone): ErrNotFound
// when neither holds it.
func (e *Engine) findErrorGroup(ctx context.Context, id string) (*ErrorGroup, *backend.ErrorGroupTriage, error) {
	if id == "" {
		return nil, nil, fmt.Errorf("%w: an error group id is required", ErrInvalid)
	}
	verdicts, err := e.triageByKey(ctx)
	if err != nil {
		return nil, nil, err
	}
	groups, err := e.store.JobErrorGroups(ctx, &backend.JobErrorGroupsParams{
		Filter: Filter{States: deadStates}, Limit: errorGroupLookupLimit})
	if err != nil {
		return nil, nil, fmt.Errorf("error group %s: %w", id, err)
	}
	for i := range groups {
		g := &groups[i]
		if sluicetype.ErrorGroupID(g.Queue, g.Kind, g.Pattern) == id {
			g.Selector = groupSelector(Filter{States: deadStates}, g)
			return g, verdicts[triageKey{g.Queue, g.Kind, g.Pattern}], nil
		}
	}
	for k, v := range verdicts {
		if sluicetype.ErrorGroupID(k.queue, k.kind, k.pattern) == id {
			g := &ErrorGroup{Queue: k.queue, Kind: k.kind, Pattern: k.pattern}
			g.Selector = groupSelector(Filter{States: deadStates}, g)
			return g, v, nil
		}
	}
	return nil, nil, fmt.Errorf("error group %s: %w", id, ErrNotFound)
}

// setTriage writes the verdict status (open: none) on the group id names
// and returns the group as it then stands. A replayed request (an
// idempotency key whose write committed) writes nothing and answers the
// group as it stands now.
func (e *Engine) setTriage(ctx context.Context, id string, status GroupStatus, note string) (*ErrorGroup, error) {
	if utf8.RuneCountInString(note) > MaxErrorGroupNote {
		return nil, fmt.Errorf("%w: error group %s: the note is over %d characters", ErrInvalid, id, MaxErrorGroupNote)
	}
	note = sluicetype.StorableText(note)
	g, v, err := e.findErrorGroup(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, ok, err := replayed[struct{}](ctx); ok {
		if err != nil {
			return nil, err
		}
		return g, e.applyTriage(ctx, g, v, false)
	}
	if status == GroupOpen && (v == nil || v.Status != GroupIgnored) {
		// Un-ignoring a group nobody ignored changes nothing.
		return g, e.applyTriage(ctx, g, v, false)
	}
	w, err := e.store.ErrorGroupTriageSet(auditCtx(ctx), &backend.ErrorGroupTriageSetParams{
		Queue: g.Queue, Kind: g.Kind, Pattern: g.Pattern, Status: status, Note: note, Actor: ActorFrom(ctx)})
	if err != nil {
		return nil, fmt.Errorf("error group %s: %w", id, err)
	}
	return g, e.applyTriage(ctx, g, w, false)
}

// resolveErrorGroup is ResolveErrorGroup without the Interceptor.
func (e *Engine) resolveErrorGroup(ctx context.Context, p ErrorGroupResolveParams) (*ErrorGroup, error) {
	return e.setTriage(ctx, p.ID, GroupResolved, p.Note)
}

// ignoreErrorGroup is IgnoreErrorGroup without the Interceptor.
func (e *Engine) ignoreErrorGroup(ctx context.Context, p ErrorGroupIgnoreParams) (*ErrorGroup, error) {
	return e.setTriage(ctx, p.ID, GroupIgnored, p.Note)
}

// unignoreErrorGroup is UnignoreErrorGroup without the Interceptor.
func (e *Engine) unignoreErrorGroup(ctx context.Context, p ErrorGroupUnignoreParams) (*ErrorGroup, error) {
	return e.setTriage(ctx, p.ID, GroupOpen, "")
}
