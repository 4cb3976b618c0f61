package tui

// The bulk dialog: a dry run's preview, its cutoff, the run with its
// progress, and what the screen shows of each phase.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

type bulkPhase int

const (
	bulkLoading bulkPhase = iota
	bulkPreview
	bulkStarting
	bulkRunning
	// bulkDone shows how the operation ended until the operator closes
	// it: a dialog that closed itself at the end would hide the result
	// of a short run before anyone saw it.
	bulkDone
	bulkFailed
)

// bulkDialog is a bulk action, from its dry run to its result: dry run
// → preview → confirm → progress → result.
type bulkDialog struct {
	// w and h are the box's width and the height it may take.
	w, h int
	// stale: the last poll of the operation's progress failed; what the
	// dialog shows is as of the poll before.
	stale    bool
	phase    bulkPhase
	action   engine.Action
	selector engine.Filter
	from     string // "the current filter", "error group …"
	seq      uint64
	preview  *engine.BulkResult
	op       *engine.Operation
	hidden   int
	visible  bool
	err      error

	// rateIn is the rate limit typed in the preview, in jobs per second
	// ("" or 0: as fast as the store goes). It keeps a redrive from
	// flooding a downstream that has just come back, and lets progress be
	// watched.
	rateIn string

	// The cutoff field (retries): only jobs that died before it. origin
	// is the selector as the dialog opened; cutoffSet what was applied
	// last.
	origin    engine.Filter
	cutoff    textField
	cutoffSet string

	// The start field: the run waits for a time (BulkStart's key puts
	// the keys in it); startAt is what it reads as (nil: at once).
	start   textField
	startAt *time.Time

	// The canary fields (retries; BulkCanary's key puts the keys in the
	// size, tab takes them on to the halt threshold): canaryOf reads
	// them.
	canary bulkCanary

	firstAt        time.Time
	firstProcessed int64
	rate           float64
	cancelling     bool

	// asOf is when the preview counted (its plan's cutoff, store clock;
	// the answer's arrival when it has no plan): the count is a snapshot,
	// and the list behind the dialog keeps moving.
	asOf time.Time
	// live is how the console's live counts (the state tabs) count what
	// the selector matches, when they can; base is that count read just
	// after the dry run (baseOK: it was read). The tabs' rise since is
	// how many more match now that the run leaves out. A count compared
	// with itself, not with the preview's: the counters also hold jobs a
	// bulk selector leaves out (superseded ones).
	live   liveKey
	base   int64
	baseOK bool
}

// liveKey names the live count that counts a selector: one state, in one
// queue or all (ok false: the counters cannot count the selector, which
// names more than a state and a queue).
type liveKey struct {
	ok    bool
	state engine.State
	queue string
}

// liveKeyOf is the live count of sel, when the maintained counters (what
// the state tabs show) count exactly it.
func liveKeyOf(sel engine.Filter) liveKey {
	if len(sel.States) != 1 || !countsServe(sel) {
		return liveKey{}
	}
	k := liveKey{ok: true, state: sel.States[0]}
	if len(sel.Queues) == 1 {
		k.queue = sel.Queues[0]
	}
	return k
}

// of reads the key's count from counters.
func (k liveKey) of(c *engine.Counts) (int64, bool) {
	if !k.ok || c == nil {
		return 0, false
	}
	if k.queue != "" {
		return c.Queues[k.queue][k.state], true
	}
	return c.Total[k.state], true
}

// moreSince is how many more jobs the live counts hold for the selector
// than they did at the dry run (ok false: the console cannot know).
func (m *Model) moreSince(b *bulkDialog) (int64, bool) {
	if !b.baseOK {
		return 0, false
	}
	now, ok := b.live.of(m.tally.counts)
	if !ok {
		return 0, false
	}
	return now - b.base, true
}

// bulkAgeTickMsg redraws the preview's age each second while it is open.
type bulkAgeTickMsg struct{ seq uint64 }

func bulkAgeTick(seq uint64) tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return bulkAgeTickMsg{seq: seq} })
}

// ratePerSecond is the typed rate, 0 for none.
func (b *bulkDialog) ratePerSecond() int {
	n, err := strconv.Atoi(b.rateIn)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// startBulk previews action over every job sel matches.
func (m *Model) startBulk(a engine.Action, sel engine.Filter, from string) tea.Cmd {
	if m.sess.readOnly {
		return nil
	}
	if a == engine.ActionDelete && m.sess.notAdmin {
		return m.toastErr(fmt.Sprintf("a bulk delete needs the admin role; this session's is %s", m.sess.meta.Role))
	}
	if m.dlg.bulk != nil && (m.dlg.bulk.phase == bulkRunning || m.dlg.bulk.phase == bulkStarting) {
		m.dlg.bulk.visible = true
		return nil
	}
	if sel.IsEmpty() {
		return m.toastErr("a bulk action needs a filter")
	}
	m.loads.seq++
	m.dlg.bulk = &bulkDialog{phase: bulkLoading, action: a, selector: sel, origin: sel, from: from, seq: m.loads.seq, visible: true,
		hidden: m.jobs.hiddenMarks(), live: liveKeyOf(sel), cutoff: cutoffField(), start: startField(), canary: newBulkCanary()}
	return m.dryRunCmd(m.dlg.bulk)
}

// rerunDryRun counts again: a new dry run under a new tag, so the answer
// of the one before, if still on its way, is dropped. The typed rate
// stays.
func (m *Model) rerunDryRun() tea.Cmd {
	b := m.dlg.bulk
	m.loads.seq++
	b.seq = m.loads.seq
	b.phase, b.preview, b.err = bulkLoading, nil, nil
	b.asOf, b.base, b.baseOK = time.Time{}, 0, false
	return m.dryRunCmd(b)
}

// watchOperation shows the progress of an operation already running.
func (m *Model) watchOperation(op *engine.Operation) tea.Cmd {
	m.loads.seq++
	m.dlg.bulk = &bulkDialog{phase: bulkRunning, action: op.Action, selector: op.Selector, seq: m.loads.seq, visible: true, op: op}
	return m.pollOperation(op.ID, m.loads.seq)
}

// Update takes the keys while the dialog is shown; any other message
// (the answers of its dry run, its start and its polls) goes where the
// root sends them, bulkMsg, which checks their tags.
func (b *bulkDialog) Update(m *Model, msg tea.Msg) tea.Cmd {
	if key, ok := msg.(tea.KeyPressMsg); ok {
		return b.key(m, key)
	}
	return m.bulkMsg(msg)
}

// key takes a key while the dialog is shown.
func (b *bulkDialog) key(m *Model, msg tea.KeyPressMsg) tea.Cmd {
	km := m.km
	switch b.phase {
	case bulkPreview:
		if b.cutoff.on {
			return m.cutoffKey(msg)
		}
		if b.start.on {
			return m.startKey(msg)
		}
		if b.canary.on() {
			return m.canaryKey(msg)
		}
		switch {
		case msg.String() == "tab" && b.hasCutoff():
			b.cutoff.on = true
			return nil
		case km.Matches(msg, keymap.BulkStart) && b.preview != nil && b.preview.Matched > 0:
			b.start.on = true
			return nil
		case km.Matches(msg, keymap.BulkCanary) && b.hasCutoff() && b.preview != nil && b.preview.Matched > 0:
			b.canary.size.on = true
			return nil
		case km.Matches(msg, keymap.Confirm):
			if b.preview == nil || b.preview.Matched == 0 {
				m.dlg.bulk = nil
				return nil
			}
			b.phase = bulkStarting
			// The preview's plan: the run takes only jobs that were in
			// their state when the preview counted, never more, however
			// late it starts.
			return m.bulkCmd(engine.BulkParams{Action: b.action, Selector: b.selector, Plan: b.preview.Plan, RatePerSecond: b.ratePerSecond(),
				StartAt: b.startAt, Canary: b.canary.params()}, b.seq)
		case km.Matches(msg, keymap.Back), km.Matches(msg, keymap.Quit), msg.String() == "n":
			return m.dropBulk()
		case km.Matches(msg, keymap.Refresh):
			return m.rerunDryRun()
		case len(msg.Text) == 1 && msg.Text[0] >= '0' && msg.Text[0] <= '9':
			// Digits type the rate limit (no other key of the preview is
			// a digit), while the rate field is drawn: with nothing to do
			// it is not, and a time typed there without tab went into it
			// unseen.
			if b.preview == nil || b.preview.Matched == 0 {
				return nil
			}
			if len(b.rateIn) < maxRateDigits && (b.rateIn != "" || msg.Text != "0") {
				b.rateIn += msg.Text
			}
		case msg.String() == "backspace":
			if b.rateIn != "" {
				b.rateIn = b.rateIn[:len(b.rateIn)-1]
			}
		}
	case bulkRunning:
		switch {
		case km.Matches(msg, keymap.Cancel) && b.op != nil && !b.cancelling:
			b.cancelling = true
			return m.cancelOperation(b.op.ID)
		case km.Matches(msg, keymap.Back), km.Matches(msg, keymap.Quit):
			b.visible = false
			return m.jobs.refresh(m)
		}
	case bulkDone:
		if km.Matches(msg, keymap.Back) || km.Matches(msg, keymap.Quit) || km.Matches(msg, keymap.Confirm) || msg.String() == "enter" {
			m.dlg.bulk = nil
			return m.refresh()
		}
	case bulkStarting:
		// The run is asked for and its answer is on its way: esc hides
		// the dialog, it does not drop it. Dropped, the answer that
		// started the operation found no dialog and was discarded: the
		// run went on with nothing on screen (no dialog, no progress in
		// the status line) for as long as it lasted.
		if km.Matches(msg, keymap.Back) || km.Matches(msg, keymap.Quit) {
			b.visible = false
			return m.toast("the run is starting; its progress shows in the status line (b shows the dialog)")
		}
	default:
		if km.Matches(msg, keymap.Back) || km.Matches(msg, keymap.Quit) {
			m.dlg.bulk = nil
		}
	}
	return nil
}

// hasCutoff reports whether the dialog offers the cutoff field: a retry
// of jobs that died (finalized<: the time a job ended).
func (b *bulkDialog) hasCutoff() bool { return b.action == engine.ActionRetry }

// cutoffField is the cutoff field: a time in any form the filter
// grammar takes after finalized<.
func cutoffField() textField { return textField{accept: "0123456789:-+.TZsmhdw", max: 40} }

// startField is the start field: HH:MM or an RFC 3339 time.
func startField() textField { return textField{accept: "0123456789:-+.TZ", max: 35} }

// cutoffKey types in the cutoff field. tab or enter leaves it, applying
// what was typed (a new dry run when it changed the selector); esc
// cancels the dialog as anywhere in it.
func (m *Model) cutoffKey(msg tea.KeyPressMsg) tea.Cmd {
	b := m.dlg.bulk
	switch b.cutoff.key(m.km, msg) {
	case fieldLeft:
		b.cutoff.on = false
		return m.applyCutoff()
	case fieldDropped:
		return m.dropBulk()
	}
	return nil
}

// startKey types in the start field. tab or enter leaves it, reading
// what was typed (an empty field starts at once); esc cancels the dialog
// as anywhere in it.
func (m *Model) startKey(msg tea.KeyPressMsg) tea.Cmd {
	b := m.dlg.bulk
	switch b.start.key(m.km, msg) {
	case fieldLeft:
		b.start.err, b.startAt = "", nil
		if v := strings.TrimSpace(b.start.in); v != "" {
			at, err := engine.ParseStartAt(v, m.now())
			if err != nil {
				b.start.err = strings.TrimPrefix(err.Error(), engine.ErrInvalid.Error()+": ")
				return nil
			}
			b.startAt = &at
		}
		b.start.on = false
	case fieldDropped:
		return m.dropBulk()
	}
	return nil
}

// dropBulk closes the preview, having changed nothing.
func (m *Model) dropBulk() tea.Cmd {
	m.dlg.bulk = nil
	return m.toast("bulk cancelled — nothing changed")
}

// applyCutoff narrows the dialog's selector to the jobs that died before
// the typed time (any form the filter grammar takes after finalized<),
// and counts again; an empty field puts back the selector's own.
func (m *Model) applyCutoff() tea.Cmd {
	b := m.dlg.bulk
	v := strings.TrimSpace(b.cutoff.in)
	if v == b.cutoffSet && b.cutoff.err == "" {
		return nil
	}
	sel := b.origin
	if v != "" {
		f, err := engine.ParseQueryAt("finalized<"+v, m.now())
		if err != nil {
			b.cutoff.err = strings.TrimPrefix(err.Error(), engine.ErrInvalid.Error()+": ")
			b.cutoff.on = true
			return nil
		}
		sel.FinalizedBefore = f.FinalizedBefore
	}
	b.cutoff.err, b.cutoffSet = "", v
	b.selector, b.live = sel, liveKeyOf(sel)
	return m.rerunDryRun()
}

func (m *Model) bulkMsg(msg tea.Msg) tea.Cmd {
	b := m.dlg.bulk
	switch msg := msg.(type) {
	case bulkPreviewMsg:
		if b == nil || msg.seq != b.seq {
			return nil
		}
		if msg.err != nil {
			b.phase, b.err = bulkFailed, msg.err
			return nil
		}
		b.phase, b.preview = bulkPreview, msg.res
		m.takeExact(b.selector, msg.res, msg.at)
		b.asOf = msg.at
		if msg.res.Plan != nil {
			b.asOf = msg.res.Plan.Cutoff
		}
		b.base, b.baseOK = msg.base, msg.baseOK
		return bulkAgeTick(b.seq)
	case bulkAgeTickMsg:
		if b == nil || msg.seq != b.seq || b.phase != bulkPreview || !b.visible {
			return nil
		}
		return bulkAgeTick(b.seq)
	case bulkStartedMsg:
		if b == nil || msg.seq != b.seq {
			return nil
		}
		if msg.err != nil || msg.res.Operation == nil {
			// Shown even if hidden meanwhile: a run that did not start
			// must not pass for one that runs.
			b.visible = true
			b.phase, b.err = bulkFailed, msg.err
			if b.err == nil {
				b.err = fmt.Errorf("no operation was started")
			}
			return nil
		}
		op := msg.res.Operation
		if mark := engine.StartMark(op, m.now()); mark != "" {
			// Nothing runs before its time: the dialog closes, and
			// :operations shows the run waiting, cancellable there.
			m.dlg.bulk = nil
			cmds := []tea.Cmd{m.toast(fmt.Sprintf("bulk %s %s — :operations shows it", op.Action, mark))}
			if m.screen == scrOperations {
				cmds = append(cmds, m.loadScreen(scrOperations))
			}
			return tea.Batch(cmds...)
		}
		b.phase, b.op = bulkRunning, op
		return m.pollOperation(b.op.ID, b.seq)
	case opTickMsg:
		if b == nil || msg.seq != b.seq || b.op == nil {
			return nil
		}
		return m.pollOperation(b.op.ID, b.seq)
	case opPollMsg:
		if b == nil || msg.seq != b.seq {
			return nil
		}
		next := tea.Tick(m.opts.PollInterval, func(time.Time) tea.Msg { return opTickMsg{seq: msg.seq} })
		if msg.err != nil {
			// Keep polling; the banner says the store is away, and the
			// dialog stops showing a rate and an ETA it cannot know.
			b.stale = true
			return tea.Batch(m.failed(retryCounts, "operation progress", msg.err), next)
		}
		b.stale = false
		b.op = msg.op
		if b.firstAt.IsZero() {
			b.firstAt, b.firstProcessed = msg.at, msg.op.Processed
		} else if dt := msg.at.Sub(b.firstAt).Seconds(); dt > 0 {
			b.rate = float64(msg.op.Processed-b.firstProcessed) / dt
		}
		if opDone(msg.op.Status) {
			if b.visible {
				// Stay open on the result until the operator closes it;
				// the toast says it too.
				b.phase = bulkDone
			} else {
				m.dlg.bulk = nil
			}
			op := msg.op
			text := fmt.Sprintf("bulk %s %s: %s matched, %s %s, %s failed", op.Action, op.Status,
				commas(op.Matched), commas(op.Succeeded), pastTense[op.Action], commas(op.Failed))
			var t tea.Cmd
			if op.Status == engine.OperationFailed || op.Status == engine.OperationHalted {
				t = m.toastErr(text + ": " + termtext.Line(op.Error))
			} else {
				t = m.toast(text)
			}
			return tea.Batch(t, m.refresh())
		}
		return next
	case opCancelMsg:
		if msg.err != nil {
			if b != nil {
				b.cancelling = false
			}
			return m.toastErr("cancel operation: " + termtext.Line(msg.err.Error()))
		}
		var cmds []tea.Cmd
		if b == nil || !b.visible {
			// The dialog, when open, says "cancelling…" itself; a toast
			// would wait for it to close and say so after the end.
			cmds = append(cmds, m.toast("operation cancelling after its current batch"))
		}
		if m.screen == scrOperations {
			cmds = append(cmds, m.loadScreen(scrOperations))
		}
		return tea.Batch(cmds...)
	}
	return nil
}

// opDone: the operation ended, or halted itself (it waits for an
// operator's resume or cancel, on :operations).
func opDone(s engine.OperationStatus) bool {
	return s == engine.OperationCompleted || s == engine.OperationFailed || s == engine.OperationCancelled ||
		s == engine.OperationHalted
}

// describeFilter writes a selector for people: "queue billing, kind x".
func describeFilter(f engine.Filter) string {
	var parts []string
	list := func(name string, vs []string) {
		if len(vs) > 0 {
			s := make([]string, len(vs))
			for i, v := range vs {
				s[i] = termtext.Line(v)
			}
			parts = append(parts, name+" "+strings.Join(s, ", "))
		}
	}
	states := make([]string, len(f.States))
	for i, s := range f.States {
		states[i] = string(s)
	}
	list("state", states)
	list("queue", f.Queues)
	list("kind", f.Kinds)
	if f.ErrorPattern != "" {
		// Quoted with its own quotes escaped: a pattern holds "<str>".
		parts = append(parts, "error group "+termtext.Line(strconv.Quote(f.ErrorPattern)))
	}
	if f.Error != "" {
		parts = append(parts, "error \""+termtext.Line(f.Error)+"\"")
	}
	if f.Fingerprint != "" {
		parts = append(parts, "fingerprint "+f.Fingerprint[:min(12, len(f.Fingerprint))])
	}
	if f.UniqueKey != "" {
		parts = append(parts, "unique key "+f.UniqueKey[:min(12, len(f.UniqueKey))])
	}
	if len(f.IDs) > 0 {
		parts = append(parts, plural(int64(len(f.IDs)), "id", "ids"))
	}
	list("tag", f.Tags)
	if len(f.Payload)+len(f.Meta) > 0 || f.CreatedAfter != nil || f.CreatedBefore != nil || f.FinalizedAfter != nil || f.FinalizedBefore != nil {
		// Only the terms not said above, in the grammar (the whole
		// filter repeated the state, queue, kind and group).
		rest := engine.Filter{Payload: f.Payload, Meta: f.Meta, CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore,
			FinalizedAfter: f.FinalizedAfter, FinalizedBefore: f.FinalizedBefore}
		parts = append(parts, termtext.Line(rest.String()))
	}
	return strings.Join(parts, ", ")
}
