package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// queueOverrides is the retention each queue overrides, from
// QueueConfig.Retention and Config.QueueRetention (which wins where both
// name a state).
func (e *Engine) queueOverrides() map[string]map[State]time.Duration {
	out := map[string]map[State]time.Duration{}
	add := func(q string, m map[State]time.Duration) {
		if len(m) == 0 {
			return
		}
		if out[q] == nil {
			out[q] = map[State]time.Duration{}
		}
		for st, d := range m {
			out[q][st] = d
		}
	}
	for name, q := range e.cfg.Queues {
		add(name, q.Retention)
	}
	for name, m := range e.cfg.QueueRetention {
		add(name, m)
	}
	return out
}

// Retention is the retention this engine's maintenance applies (Meta
// says it too).
func (e *Engine) Retention() *RetentionPolicy {
	p := &RetentionPolicy{Default: map[State]time.Duration{}, Queues: e.queueOverrides(), Warning: e.cfg.ExpiryWarning}
	for st, d := range e.cfg.Retention {
		p.Default[st] = d
	}
	if len(p.Queues) == 0 {
		p.Queues = nil
	}
	return p
}

// expiryCuts resolves expires<within at the store's now into the cuts the
// stores match (Filter.Expiring): per state of ExpiringStates, the
// default retention's jobs outside the queues that override it, and each
// overriding queue's own. A state kept forever has no cut.
func (e *Engine) expiryCuts(now time.Time, within time.Duration) []ExpiryCut {
	pol := e.Retention()
	var cuts []ExpiryCut
	for _, st := range sluicetype.ExpiringStates {
		var over []string
		for q, m := range pol.Queues {
			if _, ok := m[st]; ok {
				over = append(over, q)
			}
		}
		sort.Strings(over)
		if r, ok := pol.Default[st]; ok && r >= 0 {
			cuts = append(cuts, ExpiryCut{State: st, NotQueues: over, Before: now.Add(within - r)})
		}
		for _, q := range over {
			if r := pol.Queues[q][st]; r >= 0 {
				cuts = append(cuts, ExpiryCut{State: st, Queues: []string{q}, Before: now.Add(within - r)})
			}
		}
	}
	return cuts
}

// resolveExpiry sets f.Expiring from f.ExpiresWithin, by the store's
// clock, which retention's sweep reads too.
func (e *Engine) resolveExpiry(ctx context.Context, f *Filter) error {
	f.Expiring = nil
	if f.ExpiresWithin == nil {
		return nil
	}
	now, err := e.store.Now(ctx)
	if err != nil {
		return fmt.Errorf("expires<: store clock: %w", err)
	}
	f.Expiring = e.expiryCuts(now, *f.ExpiresWithin)
	// Only the states the cuts name can match: a store reads no other.
	f.States = f.ReadStates()
	return nil
}

// deleteAt is when retention deletes a terminal job (the first sweep after
// it), or nil when its state is kept forever or it is not terminal.
func (e *Engine) deleteAt(j *Job) *time.Time {
	if j == nil || !j.State.Terminal() {
		return nil
	}
	d, ok := e.Retention().Of(j.Queue)[j.State]
	if !ok {
		return nil
	}
	// The sweep takes jobs whose state change and finalization are both
	// older than the retention.
	base := j.StateChangedAt
	if j.FinalizedAt != nil && j.FinalizedAt.After(base) {
		base = *j.FinalizedAt
	}
	at := base.Add(d)
	return &at
}

// ParseRetention reads retention settings, each `[QUEUE/]STATE=DURATION`:
// a Go duration, or a number of days as "14d", or "forever" (never
// deleted). Without a queue the setting is the default of the state;
// with one it overrides the default in that queue.
func ParseRetention(specs []string) (defaults map[State]time.Duration, perQueue map[string]map[State]time.Duration, err error) {
	defaults = map[State]time.Duration{}
	perQueue = map[string]map[State]time.Duration{}
	for _, spec := range specs {
		key, val, ok := strings.Cut(strings.TrimSpace(spec), "=")
		if !ok {
			return nil, nil, fmt.Errorf("%w: retention %q: want [QUEUE/]STATE=DURATION, as archived=336h or billing/completed=1h", ErrInvalid, spec)
		}
		queue, state, hasQueue := strings.Cut(key, "/")
		if !hasQueue {
			queue, state = "", key
		}
		st := State(state)
		if !st.Terminal() {
			return nil, nil, fmt.Errorf("%w: retention %q: %q is not a terminal state (completed, archived, quarantined, undecodable, cancelled)", ErrInvalid, spec, state)
		}
		if hasQueue && sluicetype.ValidateName("queue", queue) != nil {
			return nil, nil, fmt.Errorf("%w: retention %q: queue name %q does not match %s", ErrInvalid, spec, queue, NamePattern)
		}
		d, err := parseRetentionDuration(val)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: retention %q: %v", ErrInvalid, spec, err)
		}
		if !hasQueue {
			defaults[st] = d
			continue
		}
		if perQueue[queue] == nil {
			perQueue[queue] = map[State]time.Duration{}
		}
		perQueue[queue][st] = d
	}
	return defaults, perQueue, nil
}

// Forever is the retention of a state that is never deleted.
const Forever time.Duration = -1

// ParseRetentionDuration reads one retention as ParseRetention reads a
// state's: a whole number of days (90d), a Go duration (36h) or forever
// (Forever). The audit trail's retention (Config.AuditRetention) is one.
func ParseRetentionDuration(s string) (time.Duration, error) { return parseRetentionDuration(s) }

func parseRetentionDuration(s string) (time.Duration, error) {
	switch s = strings.TrimSpace(s); {
	case s == "forever":
		return Forever, nil
	case strings.HasSuffix(s, "d"):
		var n int64
		if _, err := fmt.Sscanf(s, "%dd", &n); err != nil || n < 0 || fmt.Sprintf("%dd", n) != s {
			return 0, fmt.Errorf("%q: want a whole number of days (14d), a Go duration (36h) or forever", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want a whole number of days (14d), a Go duration (36h) or forever", s)
	}
	return d, nil
}

// FormatRetention writes a retention as ParseRetention reads it, in the
// largest whole unit: 14d, 36h, 90m, 1m30s, forever.
func FormatRetention(d time.Duration) string {
	switch {
	case d < 0:
		return "forever"
	case d == 0:
		return "0s"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
