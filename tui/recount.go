package tui

import (
	"context"
	"errors"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// The idle recount: a state tab whose count under a filter stopped short
// (at the count's bound, or at the store's scan budget: "archived 9,484+"
// on Redis while a dry run said 9,997) is counted whole once the console
// is idle — no key for IdleRecount and no load on its way — and the tab
// then shows that figure, as of when it was counted, until the state's
// count changes (exactFor). One recount at a time, for the tab's state
// only, once per change of its count, and never sooner after the last
// than four times as long as that one took: whole counts keep the store
// at most a fifth busy. A key cancels the recount on its way (the store
// stops reading), so it never competes with what the operator asked for.

// defaultIdleRecount is how long the console waits idle before counting a
// capped tab whole.
const defaultIdleRecount = 3 * time.Second

// recountPace is how many times as long as a recount took the console
// waits before the next.
const recountPace = 4

// idleTickMsg: the idle wait may be over.
type idleTickMsg struct{}

// recountMsg answers a recount.
type recountMsg struct {
	seq    uint64
	filter string
	state  engine.State
	basis  countBasis
	at     time.Time
	counts *engine.JobCounts
	err    error
}

// recountKey names one count to take whole: the filter, the state and
// what was known of its count (a new basis is a new count to take).
type recountKey struct {
	filter string
	state  engine.State
	basis  countBasis
}

// idleRecount is the idle recount's state: lastInput is when the
// operator last pressed a key, clicked or pasted; armed, an idleTickMsg
// is on its way; seq tags the recount on its way (0: none), for target,
// sent at sent, cancelled by cancel; done is the count last taken whole
// (not taken again until it changes); notBefore paces recounts after a
// slow one.
type idleRecount struct {
	lastInput time.Time
	armed     bool
	seq       uint64
	target    recountKey
	sent      time.Time
	cancel    context.CancelFunc
	done      recountKey
	notBefore time.Time
}

// stop cancels the recount on its way, if any.
func (r *idleRecount) stop() {
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
	r.seq = 0
}

// note records an input at now: the console is not idle, and a recount
// on its way gives way (its answer is dropped).
func (r *idleRecount) note(now time.Time) {
	r.lastInput = now
	r.stop()
}

// recountTarget is the count the idle recount would take now.
func (m *Model) recountTarget() (recountKey, bool) {
	if m.opts.IdleRecount < 0 || m.screen != scrJobs || m.jobs.tab < 0 || m.sess.denied || m.unreachable() {
		return recountKey{}, false
	}
	s := engine.AllStates[m.jobs.tab]
	fc, off := m.filterCounts()
	if fc == nil || off || !fc.IsCapped(s) {
		return recountKey{}, false
	}
	if _, ok := m.exactFor(s); ok {
		return recountKey{}, false
	}
	k := recountKey{filter: m.jobs.filter.String(), state: s, basis: m.countBasis(s)}
	if k == m.idle.done {
		return recountKey{}, false // counted whole already: still capped past MaxCountJobsMax, or failed
	}
	return k, true
}

// busy reports whether a load is on its way or the operator is in the
// middle of something: the console is not idle then.
func (m *Model) busy() bool {
	return m.loads.countsBusy || m.loads.screenBusy || m.jobs.loading || m.sheet.detailBusy || m.live.refreshArmed ||
		m.dlg.input != nil || m.dlg.confirm != nil || m.dlg.bulk != nil || m.edit.editor != nil || m.edit.opening
}

// noteInput records a key, a click or a paste: the console is not idle,
// and a recount on its way gives way (its answer is dropped).
func (m *Model) noteInput() { m.idle.note(m.now()) }

// syncRecount stops the recount on its way when what it counts is no
// longer what the tab shows (another filter, another tab, or the count
// changed: its answer would be dropped), and sets the idle timer.
func (m *Model) syncRecount() tea.Cmd {
	if m.idle.seq != 0 {
		k := m.idle.target
		if m.screen != scrJobs || m.jobs.tab < 0 || engine.AllStates[m.jobs.tab] != k.state ||
			m.jobs.filter.String() != k.filter || m.countBasis(k.state) != k.basis {
			m.idle.stop()
		}
	}
	return m.armIdle()
}

// armIdle sets the idle timer when a capped count waits to be counted
// whole and no timer is set.
func (m *Model) armIdle() tea.Cmd {
	if m.idle.armed || m.idle.seq != 0 {
		return nil
	}
	if _, ok := m.recountTarget(); !ok {
		return nil
	}
	m.idle.armed = true
	return tea.Tick(m.idleWait(), func(time.Time) tea.Msg { return idleTickMsg{} })
}

// idleWait is how long until the console has been idle long enough (at
// least a tenth of the wait, so a busy console is not polled hot).
func (m *Model) idleWait() time.Duration {
	now := m.now()
	wait := max(m.idle.lastInput.Add(m.opts.IdleRecount).Sub(now), m.idle.notBefore.Sub(now))
	return max(wait, m.opts.IdleRecount/10)
}

// idleTick starts the recount if the console is idle, else waits again.
func (m *Model) idleTick() tea.Cmd {
	m.idle.armed = false
	k, ok := m.recountTarget()
	if !ok || m.idle.seq != 0 {
		return nil
	}
	now := m.now()
	if m.busy() || now.Sub(m.idle.lastInput) < m.opts.IdleRecount || now.Before(m.idle.notBefore) {
		return m.armIdle()
	}
	return m.recount(k)
}

// recount counts k's state under its filter whole.
func (m *Model) recount(k recountKey) tea.Cmd {
	m.loads.seq++
	m.idle.seq = m.loads.seq
	ctx, cancel := context.WithTimeout(m.ctx, callTimeout)
	m.idle.cancel = cancel
	m.idle.sent, m.idle.target = m.now(), k
	f := m.jobs.filter
	f.States = []engine.State{k.state}
	seq, ctl, at := m.loads.seq, m.ctl, m.idle.sent
	return func() tea.Msg {
		defer cancel()
		c, err := ctl.CountJobs(ctx, engine.CountJobsParams{Filter: f, Max: engine.MaxCountJobsMax, Whole: true})
		return recountMsg{seq: seq, filter: k.filter, state: k.state, basis: k.basis, at: at, counts: c, err: err}
	}
}

// recounted takes a recount's answer: the tab shows its figure unless the
// count changed while it ran (then the next idle recount counts again).
func (m *Model) recounted(msg recountMsg) tea.Cmd {
	if msg.seq != m.idle.seq {
		return nil // given way to a key, or the count changed meanwhile
	}
	m.idle.seq, m.idle.cancel = 0, nil
	took := m.now().Sub(m.idle.sent)
	m.idle.notBefore = m.now().Add(recountPace * took)
	k := recountKey{filter: msg.filter, state: msg.state, basis: msg.basis}
	switch {
	case msg.err != nil:
		// Said in the log, not on screen: the capped count stands and
		// says why; the same count is not tried again until it changes.
		m.idle.done = k
		if !errors.Is(msg.err, context.Canceled) {
			m.opts.Logger.Info("console recount failed", "state", msg.state, "err", msg.err)
		}
		return nil
	case msg.filter != m.jobs.filter.String() || msg.basis != m.countBasis(msg.state):
		return nil // another filter now, or the count changed while it ran
	}
	m.idle.done = k
	if msg.counts.IsCapped(msg.state) {
		return nil // past MaxCountJobsMax: the tab stays at least
	}
	m.tally.exact = exactCount{filter: msg.filter, state: msg.state, n: msg.counts.States[msg.state], at: msg.at, basis: msg.basis, idle: true}
	return nil
}

// recountNote says, after a capped count, that it is being counted whole.
func (m *Model) recountNote() string {
	if m.idle.seq == 0 {
		return ""
	}
	return " · counting them whole…"
}
