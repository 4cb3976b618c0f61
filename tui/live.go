package tui

import (
	"errors"
	"fmt"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
)

// Live updates and failing loads: the subscription to changes, the
// coalesced refresh it starts, and the banner and backoff of loads that
// fail (the header says unreachable while any does).

// liveState is the subscription and the health of the loads.
type liveState struct {
	// banner says why a load fails ("" when none does).
	banner string
	// failures counts the failures in a row of each kind of load that is
	// failing; retrying, a retry of it is on its way.
	failures map[retryWhat]int
	retrying map[retryWhat]bool

	sub         <-chan engine.Change
	subscribing bool
	// probing: a probeStore is on its way.
	probing bool
	// refreshArmed: a refreshTickMsg is on its way.
	refreshArmed bool
}

// failed shows a banner for a failing load and retries it with backoff:
// 1s, 2s, 4s … up to 30s, one pending retry per kind of load. A backend
// that cannot do what is asked (ErrUnsupported) is said once, not
// retried.
func (m *Model) failed(what retryWhat, name string, err error) tea.Cmd {
	if m.ctx.Err() != nil {
		return nil
	}
	if isErr(err, engine.ErrUnsupported) {
		m.live.banner = fmt.Sprintf("%s: %s", name, termtext.Line(err.Error()))
		return nil
	}
	if isErr(err, engine.ErrDenied) {
		// A token the server does not take (or a role it refuses) is not
		// an outage: asking again will not help, so nothing is retried
		// and the header says refused, not unreachable.
		m.sess.denied = true
		m.live.banner = fmt.Sprintf("%s refused: %s — start the console with a token the server accepts", name, termtext.Line(err.Error()))
		return nil
	}
	n, failing := m.live.failures[what]
	if failing && m.live.retrying[what] {
		// A load redone early (succeeded, the probe) failed again while
		// its retry is on its way: the backoff and its warning stand.
		return nil
	}
	m.live.failures[what] = n + 1
	wait := min(time.Second<<min(n, 5), 30*time.Second)
	m.live.banner = fmt.Sprintf("%s failed: %s — retrying in %s", name, termtext.Line(err.Error()), wait)
	if m.live.retrying[what] {
		return nil
	}
	m.live.retrying[what] = true
	m.opts.Logger.Warn("console load failed", "what", name, "err", err, "retry_in", wait)
	return tea.Tick(wait, func(time.Time) tea.Msg { return retryMsg{what: what} })
}

// succeeded notes a load that worked. An answer says the API may be
// back, so the loads still waiting out their backoff are redone now
// instead of up to 30s later. The warning goes when none is failing: an
// answer of the API's meta says nothing of its store, which may still be
// away (each redone load clears its own failure when it works).
func (m *Model) succeeded(what retryWhat) tea.Cmd {
	delete(m.live.failures, what)
	if len(m.live.failures) == 0 {
		m.live.banner = ""
		return nil
	}
	var cmds []tea.Cmd
	for w := range m.live.failures {
		cmds = append(cmds, m.load(w))
	}
	return tea.Batch(cmds...)
}

// unreachable reports whether a load is failing (the API or the store is
// away): the header says so instead of live.
func (m *Model) unreachable() bool { return len(m.live.failures) > 0 }

// load redoes one kind of load now.
func (m *Model) load(what retryWhat) tea.Cmd {
	switch what {
	case retryMeta:
		return m.loadMeta()
	case retryCounts:
		return m.loadCounts()
	case retryList:
		return m.jobs.retry(m)
	case retryScreen:
		if m.screen != scrJobs {
			return m.loadScreen(m.screen)
		}
	case retrySubscribe:
		if m.live.sub == nil && !m.live.subscribing && !m.opts.NoSubscribe {
			return m.subscribe()
		}
	}
	return nil
}

func (m *Model) retry(what retryWhat) tea.Cmd {
	delete(m.live.retrying, what)
	if _, failing := m.live.failures[what]; !failing {
		return nil // it worked meanwhile
	}
	return m.load(what)
}

// changes coalesces live changes into one refresh after a short delay.
// A stream that says it is lost (a client that reconnects by itself
// could not at once: the server is away) is a failing load from then on,
// as a stream that ends is: the header says unreachable at once, not at
// the next probe, and the resync that says it is back clears it.
func (m *Model) changes(msg changesMsg) tea.Cmd {
	if msg.ch != m.live.sub {
		return nil // from a subscription given up
	}
	var cmds []tea.Cmd
	reload := false
	for _, c := range msg.changes {
		switch c.Kind {
		case engine.ChangeLost:
			err := c.Err
			if err == nil {
				err = errors.New("stream lost")
			}
			cmds = append(cmds, m.failed(retrySubscribe, "live updates", err))
			continue // nothing to reload from a server that is away
		case engine.ChangeResync:
			if _, failing := m.live.failures[retrySubscribe]; failing {
				cmds = append(cmds, m.succeeded(retrySubscribe))
			}
			// Changes were missed: the open sheet's job among them, maybe.
			m.sheet.stale = m.sheet.open && m.sheet.id != ""
		case engine.ChangeJob, engine.ChangeOperation:
			// A change that names no job (another process's, heard
			// through the counters or a wake-up: a reaper's, a worker's)
			// or an operation's may be the sheet's job: it is read again.
			if m.sheet.open && m.sheet.id != "" && (c.JobID == "" || c.JobID == m.sheet.id) {
				m.sheet.stale = true
			}
		}
		reload = true
	}
	if msg.closed {
		m.live.sub = nil
		if m.ctx.Err() == nil && !m.opts.NoSubscribe {
			cmds = append(cmds, m.failed(retrySubscribe, "live updates", fmt.Errorf("stream ended")))
		}
	} else {
		cmds = append(cmds, waitChanges(m.ctx, m.live.sub))
	}
	if reload && !m.live.refreshArmed {
		m.live.refreshArmed = true
		cmds = append(cmds, tea.Tick(m.opts.RefreshDelay, func(time.Time) tea.Msg { return refreshTickMsg{} }))
	}
	return tea.Batch(cmds...)
}

// refresh reloads what is on screen, keeping the cursor on its job, and
// redoes at once every load that is waiting to be retried.
func (m *Model) refresh() tea.Cmd {
	var cmds []tea.Cmd
	if m.loads.countsBusy {
		m.loads.countsAgain = true
	} else {
		cmds = append(cmds, m.loadCounts())
	}
	for w := range m.live.failures {
		if w != retryCounts && w != retryList && w != retryScreen {
			cmds = append(cmds, m.load(w))
		}
	}
	switch m.screen {
	case scrJobs:
		cmds = append(cmds, m.jobs.refresh(m))
		if m.sheet.open && m.sheet.id != "" && m.sheet.stale {
			m.sheet.stale = false
			cmds = append(cmds, m.loadDetail(m.sheet.id, false))
		}
	default:
		cmds = append(cmds, m.reloadScreen())
	}
	return tea.Batch(cmds...)
}

// reloadAll is ctrl+r: everything on screen is read again now — the
// counts, the list or screen, and the open sheet, whether or not a change
// was heard for it.
func (m *Model) reloadAll() tea.Cmd {
	if m.sheet.open && m.sheet.id != "" {
		m.sheet.stale = true
	}
	if m.screen != scrJobs && !m.loads.screenBusy {
		// Not paced as a live reload is: the operator asked.
		m.loads.screenNotBefore = time.Time{}
	}
	return m.refresh()
}

// reloadScreen is a live reload of the screen shown (not the jobs list):
// it waits for the load on its way, and paces itself after a slow one
// (screenNotBefore).
func (m *Model) reloadScreen() tea.Cmd {
	if m.loads.screenBusy {
		m.loads.screenAgain = true
		return nil
	}
	if wait := m.loads.screenNotBefore.Sub(m.now()); wait > 0 {
		m.loads.screenAgain = true
		if m.loads.screenTick {
			return nil
		}
		m.loads.screenTick = true
		return tea.Tick(wait, func(time.Time) tea.Msg { return screenTickMsg{} })
	}
	m.loads.screenAgain = false
	return m.loadScreen(m.screen)
}

func (m *Model) opsTick() tea.Cmd {
	seq := m.loads.screenSeq
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return opsTickMsg{seq: seq} })
}
