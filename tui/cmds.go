package tui

import (
	"context"
	"errors"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// Every call to engine.Control happens in a tea.Cmd, never in Update. A
// command captures the values it needs (ids, filters, a sequence number)
// and answers with a message; the answer to an older request than the
// latest of its kind is dropped by Update.

// callTimeout bounds one Control call made for the screen.
const callTimeout = 15 * time.Second

type metaMsg struct {
	meta *engine.Meta
	err  error
}

func (m *Model) loadMeta() tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		meta, err := ctl.Meta(c)
		return metaMsg{meta: meta, err: err}
	}
}

// probeMsg answers probeStore.
type probeMsg struct{ err error }

// probeStore reads the maintained counters of every queue: the cheapest
// read that reaches the store, so a store that went away shows in the
// header even while nothing changes on screen (ageTickMsg).
func (m *Model) probeStore() tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := ctl.Counts(c, "")
		return probeMsg{err: err}
	}
}

type countsMsg struct {
	seq    uint64
	counts *engine.Counts
	// fcounts are the filter's own counts (fkey names the filter), asked
	// for when the counters cannot answer it; fOff: the backend cannot
	// count that filter.
	fcounts *engine.JobCounts
	fkey    string
	fOff    bool
	// expiring counts, per state, the jobs retention deletes within the
	// engine's warning window, when this load read them (expiringEvery).
	expiring map[engine.State]int64
	err      error
}

// expiringEvery is how long a read of the expiring jobs serves the tabs:
// it counts over each dead state's jobs, which a storm's live reloads of
// the counters would repeat for nothing.
const expiringEvery = 30 * time.Second

// expiringDue reports whether the next counts load reads the expiring
// jobs too: the engine says its warning window, and the last read is
// expiringEvery old.
func (m *Model) expiringDue() bool {
	me := m.sess.meta
	return me != nil && me.Retention != nil && me.Retention.Warning > 0 && m.now().Sub(m.tally.expiringAt) >= expiringEvery
}

// countExpiring loads the counts with the expiring jobs when they are due:
// after the meta first says the window (the first counts went without),
// and on the age tick, since jobs come within the window as time passes
// with no change to hear.
func (m *Model) countExpiring() tea.Cmd {
	switch {
	case !m.expiringDue():
		return nil
	case m.loads.countsBusy:
		m.loads.countsAgain = true
		return nil
	}
	return m.loadCounts()
}

// loadCounts reads the counters and, under a filter they cannot answer,
// the filter's counts per state, bounded (engine.DefaultCountJobsMax).
func (m *Model) loadCounts() tea.Cmd {
	m.loads.seq++
	m.loads.countsSeq = m.loads.seq
	m.loads.countsBusy = true
	seq, ctl, ctx := m.loads.seq, m.ctl, m.ctx
	queue := ""
	if qs := m.jobs.filter.Queues; len(qs) == 1 {
		queue = qs[0]
	}
	f := m.jobs.filter
	filtered := !countsServe(f)
	var window time.Duration
	if m.expiringDue() {
		// Until an answer with them arrives, every load asks: a newer
		// load's answer drops an older one's.
		window = m.sess.meta.Retention.Warning
	}
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		counts, err := ctl.Counts(c, queue)
		msg := countsMsg{seq: seq, counts: counts, err: err}
		if err == nil && window > 0 {
			// Best effort: a store that cannot count it leaves the tabs
			// as they were.
			if ec, err := ctl.CountJobs(c, engine.CountJobsParams{
				Filter: engine.Filter{States: engine.ExpiringStates, ExpiresWithin: &window}}); err == nil {
				msg.expiring = ec.States
			}
		}
		if err != nil || !filtered {
			return msg
		}
		msg.fkey = f.String()
		msg.fcounts, err = ctl.CountJobs(c, engine.CountJobsParams{Filter: f})
		switch {
		case errors.Is(err, engine.ErrUnsupported):
			msg.fcounts, msg.fOff = nil, true
		case err != nil:
			msg.err = err
		}
		return msg
	}
}

// listMode says what a list load does with its rows.
type listMode int

const (
	listReplace listMode = iota // a new filter or tab: start over
	listAppend                  // scrolled near the end of the window: older rows
	listPrepend                 // scrolled near the start of the window: newer rows
	listRefresh                 // live update at the top: reload the rows on screen, keep the cursor
	listSegment                 // live update deeper: reload the rows on screen after an anchor row
	listTop                     // jump to the top: the first page
	listBottom                  // jump to the bottom: the last page
)

type listMsg struct {
	seq    uint64
	mode   listMode
	jobs   []*engine.Job
	next   string
	prev   string
	filter engine.Filter
	// anchor is the row a segment was loaded after.
	anchor string
	// scan is the store's word that it stopped at its scan budget.
	scan *engine.ScanReport
	err  error
}

// loadList fetches rows for the jobs screen: one page from cursor, or
// for a refresh up to want rows from the start, in pages.
func (m *Model) loadList(mode listMode, cursor string, want int) tea.Cmd {
	return m.listCmd(mode, cursor, want, "")
}

// loadSegment fetches up to want rows after the anchor row (cursor pages
// on from it), in pages.
func (m *Model) loadSegment(cursor string, want int, anchor string) tea.Cmd {
	return m.listCmd(listSegment, cursor, want, anchor)
}

func (m *Model) listCmd(mode listMode, cursor string, want int, anchor string) tea.Cmd {
	m.loads.seq++
	m.jobs.listSeq = m.loads.seq
	m.jobs.loading = true
	m.jobs.loadMode = mode
	seq, ctl, ctx := m.loads.seq, m.ctl, m.ctx
	f := m.jobs.effectiveFilter()
	pageSize := m.opts.PageSize
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		out := listMsg{seq: seq, mode: mode, filter: f, anchor: anchor}
		if mode != listRefresh && mode != listSegment {
			page, err := ctl.ListJobs(c, engine.ListJobsParams{Filter: f, Cursor: cursor, Limit: pageSize})
			if err != nil {
				out.err = err
				return out
			}
			out.jobs, out.next, out.prev, out.scan = page.Jobs, page.Next, page.Prev, page.Scan
			return out
		}
		cur := cursor
		for {
			page, err := ctl.ListJobs(c, engine.ListJobsParams{Filter: f, Cursor: cur, Limit: pageSize})
			if err != nil {
				out.err = err
				return out
			}
			out.jobs = append(out.jobs, page.Jobs...)
			out.next, out.scan = page.Next, page.Scan
			// A bounded page ends a refresh: scanning on is the
			// operator's call (scrolling on), not a live update's.
			if page.Next == "" || len(out.jobs) >= want || page.Scan != nil {
				return out
			}
			cur = page.Next
		}
	}
}

type detailMsg struct {
	seq     uint64
	id      string
	detail  *engine.JobDetail
	payload bool
	lines   []string // pretty payload, sanitized, when payload
	// children are the states of the job's first spawned children
	// (waits.go), read with the job.
	children map[string]engine.State
	err      error
}

// loadDetail fetches one job for the sheet; with payload it also pretty
// prints the payload off the UI goroutine (it may be many megabytes).
func (m *Model) loadDetail(id string, payload bool) tea.Cmd {
	m.loads.seq++
	if payload {
		m.sheet.payloadSeq = m.loads.seq
	} else {
		m.sheet.detailSeq = m.loads.seq
		m.sheet.detailBusy = true
	}
	seq, ctl, ctx := m.loads.seq, m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		d, err := ctl.GetJob(c, id, payload)
		out := detailMsg{seq: seq, id: id, detail: d, payload: payload, err: err}
		if err == nil && !payload {
			out.children = childStates(c, ctl, d)
		}
		if err == nil && payload && d.Job != nil {
			out.lines = prettyJSONLines(d.Job.Payload)
		}
		return out
	}
}

// actionMsg reports an Apply run over one or more chunks.
type actionMsg struct {
	action  engine.Action
	results []engine.ActionResult
	err     error
	// probation: the release of one quarantined job, whose fingerprint
	// stays quarantined (the toast says what comes next).
	probation bool
}

// applyCmd runs action over ids in chunks of at most MaxApplyIDs.
func (m *Model) applyCmd(action engine.Action, ids []string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	ids = append([]string(nil), ids...)
	return func() tea.Msg {
		var all []engine.ActionResult
		for start := 0; start < len(ids); start += engine.MaxApplyIDs {
			end := min(start+engine.MaxApplyIDs, len(ids))
			c, cancel := context.WithTimeout(ctx, callTimeout)
			res, err := ctl.Apply(c, action, ids[start:end])
			cancel()
			if err != nil {
				return actionMsg{action: action, results: all, err: err}
			}
			all = append(all, res...)
		}
		return actionMsg{action: action, results: all}
	}
}

// forceRetryCmd retries one superseded job, forced, and reports it as
// an Apply of one id.
func (m *Model) forceRetryCmd(id string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		r := engine.ActionResult{ID: id, OK: true}
		if _, err := ctl.Retry(c, id, engine.RetryOptions{Force: true}); err != nil {
			r = engine.ActionResult{ID: id, Error: err.Error(), Reason: engine.ReasonCode(err)}
		}
		return actionMsg{action: engine.ActionRetry, results: []engine.ActionResult{r}}
	}
}

type bulkPreviewMsg struct {
	seq uint64
	res *engine.BulkResult
	err error
	// at is when the answer came (console clock); base is the live count
	// of the selector read just after the dry run (baseOK: read).
	at     time.Time
	base   int64
	baseOK bool
}

// dryRunCmd runs b's dry run under b's tag and, when the counters count
// its selector, reads them right after: the base the live counts are
// compared with while the preview is open. Read after, never before, so
// a job that died in between is at worst left out of "more since", never
// said to be left out of the run when the count took it.
func (m *Model) dryRunCmd(b *bulkDialog) tea.Cmd {
	ctl, ctx, now := m.ctl, m.ctx, m.opts.Now
	p := engine.BulkParams{Action: b.action, Selector: b.selector, DryRun: true}
	seq, live := b.seq, b.live
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		res, err := ctl.Bulk(c, p)
		msg := bulkPreviewMsg{seq: seq, res: res, err: err, at: now()}
		if err != nil {
			return msg
		}
		if !live.ok {
			return msg
		}
		if counts, err := ctl.Counts(c, live.queue); err == nil {
			msg.base, msg.baseOK = live.of(counts)
		}
		return msg
	}
}

type bulkStartedMsg struct {
	seq uint64
	res *engine.BulkResult
	err error
}

// bulkCmd starts a bulk run (a dry run is dryRunCmd's).
func (m *Model) bulkCmd(p engine.BulkParams, seq uint64) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		res, err := ctl.Bulk(c, p)
		return bulkStartedMsg{seq: seq, res: res, err: err}
	}
}

type opPollMsg struct {
	seq uint64
	op  *engine.Operation
	at  time.Time
	err error
}

type opTickMsg struct{ seq uint64 }

func (m *Model) pollOperation(id string, seq uint64) tea.Cmd {
	ctl, ctx, now := m.ctl, m.ctx, m.opts.Now
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		op, err := ctl.Operation(c, id)
		return opPollMsg{seq: seq, op: op, at: now(), err: err}
	}
}

type opCancelMsg struct {
	op  *engine.Operation
	err error
}

func (m *Model) cancelOperation(id string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		op, err := ctl.CancelOperation(c, id)
		return opCancelMsg{op: op, err: err}
	}
}

// Screen loads: one message per screen, tagged.
type quarantineMsg struct {
	seq uint64
	fps []*engine.Fingerprint
	err error
}

type operationsMsg struct {
	seq uint64
	ops []*engine.Operation
	err error
}

type queuesMsg struct {
	seq    uint64
	queues []engine.QueueInfo
	limits []engine.Limit
	err    error
}

type groupsMsg struct {
	seq    uint64
	groups []engine.ErrorGroup
	err    error
}

func (m *Model) loadScreen(s screen) tea.Cmd {
	m.loads.seq++
	m.loads.screenSeq = m.loads.seq
	m.loads.screenBusy = false // any answer on its way is stale now
	m.loads.screenNotBefore = time.Time{}
	seq, ctl, ctx := m.loads.seq, m.ctl, m.ctx
	call := func(fn func(context.Context) tea.Msg) tea.Cmd {
		m.loads.screenBusy, m.loads.screenSent = true, m.now()
		return func() tea.Msg {
			c, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			return fn(c)
		}
	}
	switch s {
	case scrQuarantine:
		return call(func(c context.Context) tea.Msg {
			fps, err := ctl.Quarantine(c)
			return quarantineMsg{seq: seq, fps: fps, err: err}
		})
	case scrOperations:
		return call(func(c context.Context) tea.Msg {
			page, err := ctl.Operations(c, 100, "")
			if err != nil {
				return operationsMsg{seq: seq, err: err}
			}
			return operationsMsg{seq: seq, ops: page.Operations}
		})
	case scrQueues:
		return call(func(c context.Context) tea.Msg {
			qs, err := ctl.Queues(c)
			if err != nil {
				return queuesMsg{seq: seq, err: err}
			}
			// The limits are a note on the screen: a store or a server
			// that keeps none leaves the queues as they are.
			ls, _ := ctl.ListLimits(c)
			return queuesMsg{seq: seq, queues: qs, limits: ls}
		})
	case scrSchedules:
		return call(loadSchedules(ctl, seq))
	case scrAudit:
		return call(loadAudit(ctl, seq, m.lists.audit.q))
	case scrLimits:
		return call(func(c context.Context) tea.Msg {
			ls, err := ctl.ListLimits(c)
			return limitsMsg{seq: seq, limits: ls, err: err}
		})
	case scrErrors:
		// One rule: the groups are those of the jobs the jobs list
		// shows, its state tab and its whole filter (the title says
		// so; groupScope).
		gf, ignored := m.jobs.effectiveFilter(), m.lists.groups.ignored
		m.lists.groups.rescope(gf.String())
		return call(func(c context.Context) tea.Msg {
			gs, err := ctl.ListErrorGroups(c, engine.ListErrorGroupsParams{Filter: gf, Ignored: ignored})
			return groupsMsg{seq: seq, groups: gs, err: err}
		})
	}
	return nil
}

type releaseMsg struct {
	fingerprint string
	released    int
	err         error
}

func (m *Model) releaseFingerprint(fp string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		n, err := ctl.ReleaseFingerprint(c, fp)
		return releaseMsg{fingerprint: fp, released: n, err: err}
	}
}

type pauseMsg struct {
	queue  string
	paused bool
	err    error
}

func (m *Model) pauseQueue(queue string, pause bool) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		var err error
		if pause {
			err = ctl.PauseQueue(c, queue)
		} else {
			err = ctl.ResumeQueue(c, queue)
		}
		return pauseMsg{queue: queue, paused: pause, err: err}
	}
}

// Live updates.

type subscribedMsg struct {
	ch  <-chan engine.Change
	err error
}

type changesMsg struct {
	// ch is the subscription the changes came from: those of one the
	// console has since dropped are stale.
	ch      <-chan engine.Change
	changes []engine.Change
	closed  bool
}

func (m *Model) subscribe() tea.Cmd {
	m.live.subscribing = true
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		ch, err := ctl.Subscribe(ctx)
		return subscribedMsg{ch: ch, err: err}
	}
}

// waitChanges waits for the next change and takes whatever else is
// already queued with it, so a burst costs one update.
func waitChanges(ctx context.Context, ch <-chan engine.Change) tea.Cmd {
	return func() tea.Msg {
		var out []engine.Change
		select {
		case c, ok := <-ch:
			if !ok {
				return changesMsg{ch: ch, closed: true}
			}
			out = append(out, c)
		case <-ctx.Done():
			return nil
		}
		for len(out) < 1024 {
			select {
			case c, ok := <-ch:
				if !ok {
					return changesMsg{ch: ch, changes: out, closed: true}
				}
				out = append(out, c)
			default:
				return changesMsg{ch: ch, changes: out}
			}
		}
		return changesMsg{ch: ch, changes: out}
	}
}

// Timers.

type toastExpireMsg struct {
	id  int
	gen uint64
}

type retryMsg struct{ what retryWhat }

type retryWhat int

const (
	retryMeta retryWhat = iota
	retryCounts
	retryList
	retryScreen
	retrySubscribe
)

type refreshTickMsg struct{}

// screenTickMsg ends the pause of a paced screen reload (reloadScreen).
type screenTickMsg struct{}

type ageTickMsg struct{}

type opsTickMsg struct{ seq uint64 }
