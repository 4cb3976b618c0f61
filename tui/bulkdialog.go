package tui

// The bulk dialog: a dry run's preview, its cutoff, the run with its
// progress, and what the screen shows of each phase.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

type bulkPhase int

type bulkDialog struct {
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
	// is the selector as the dialog opened; cutoffIn is what is typed,
	// cutoffOn whether the field has the keys (tab), cutoffSet what was
	// applied last and cutoffErr why what was typed is not a time.
	origin    engine.Filter
	cutoffIn  string
	cutoffOn  bool
	cutoffSet string
	cutoffErr string

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
	now, ok := b.live.of(m.counts)
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
	if m.readOnly {
		return nil
	}
	if a == engine.ActionDelete && m.notAdmin {
		return m.toastErr(fmt.Sprintf("a bulk delete needs the admin role; this session's is %s", m.meta.Role))
	}
	if m.bulk != nil && (m.bulk.phase == bulkRunning || m.bulk.phase == bulkStarting) {
		m.bulk.visible = true
		return nil
	}
	if sel.IsEmpty() {
		return m.toastErr("a bulk action needs a filter")
	}
	m.seq++
	m.bulk = &bulkDialog{phase: bulkLoading, action: a, selector: sel, origin: sel, from: from, seq: m.seq, visible: true,
		hidden: m.jobs.hiddenMarks(), live: liveKeyOf(sel)}
	return m.dryRunCmd(m.bulk)
}

// rerunDryRun counts again: a new dry run under a new tag, so the answer
// of the one before, if still on its way, is dropped. The typed rate
// stays.
func (m *Model) rerunDryRun() tea.Cmd {
	b := m.bulk
	m.seq++
	b.seq = m.seq
	b.phase, b.preview, b.err = bulkLoading, nil, nil
	b.asOf, b.base, b.baseOK = time.Time{}, 0, false
	return m.dryRunCmd(b)
}

// watchOperation shows the progress of an operation already running.
func (m *Model) watchOperation(op *engine.Operation) tea.Cmd {
	m.seq++
	m.bulk = &bulkDialog{phase: bulkRunning, action: op.Action, selector: op.Selector, seq: m.seq, visible: true, op: op}
	return m.pollOperation(op.ID, m.seq)
}

func (m *Model) bulkKey(msg tea.KeyPressMsg) tea.Cmd {
	b := m.bulk
	km := m.km
	switch b.phase {
	case bulkPreview:
		if b.cutoffOn {
			return m.cutoffKey(msg)
		}
		switch {
		case msg.String() == "tab" && b.hasCutoff():
			b.cutoffOn = true
			return nil
		case km.Matches(msg, keymap.Confirm):
			if b.preview == nil || b.preview.Matched == 0 {
				m.bulk = nil
				return nil
			}
			b.phase = bulkStarting
			// The preview's plan: the run takes only jobs that were in
			// their state when the preview counted, never more.
			return m.bulkCmd(engine.BulkParams{Action: b.action, Selector: b.selector, Plan: b.preview.Plan, RatePerSecond: b.ratePerSecond()}, b.seq)
		case km.Matches(msg, keymap.Back), km.Matches(msg, keymap.Quit), msg.String() == "n":
			m.bulk = nil
			return m.toast("bulk cancelled — nothing changed")
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
			m.bulk = nil
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
			m.bulk = nil
		}
	}
	return nil
}

// hasCutoff reports whether the dialog offers the cutoff field: a retry
// of jobs that died (finalized<: the time a job ended).
func (b *bulkDialog) hasCutoff() bool { return b.action == engine.ActionRetry }

// cutoffKey types in the cutoff field. tab or enter leaves it, applying
// what was typed (a new dry run when it changed the selector); esc
// cancels the dialog as anywhere in it.
func (m *Model) cutoffKey(msg tea.KeyPressMsg) tea.Cmd {
	b := m.bulk
	switch k := msg.String(); {
	case k == "tab" || k == "enter":
		b.cutoffOn = false
		return m.applyCutoff()
	case m.km.Matches(msg, keymap.Back):
		m.bulk = nil
		return m.toast("bulk cancelled — nothing changed")
	case k == "backspace":
		if b.cutoffIn != "" {
			b.cutoffIn = b.cutoffIn[:len(b.cutoffIn)-1]
		}
	case len(msg.Text) == 1 && strings.ContainsRune("0123456789:-+.TZsmhdw", rune(msg.Text[0])) && len(b.cutoffIn) < 40:
		b.cutoffIn += msg.Text
	}
	return nil
}

// applyCutoff narrows the dialog's selector to the jobs that died before
// the typed time (any form the filter grammar takes after finalized<),
// and counts again; an empty field puts back the selector's own.
func (m *Model) applyCutoff() tea.Cmd {
	b := m.bulk
	v := strings.TrimSpace(b.cutoffIn)
	if v == b.cutoffSet && b.cutoffErr == "" {
		return nil
	}
	sel := b.origin
	if v != "" {
		f, err := engine.ParseQueryAt("finalized<"+v, m.now())
		if err != nil {
			b.cutoffErr = strings.TrimPrefix(err.Error(), engine.ErrInvalid.Error()+": ")
			b.cutoffOn = true
			return nil
		}
		sel.FinalizedBefore = f.FinalizedBefore
	}
	b.cutoffErr, b.cutoffSet = "", v
	b.selector, b.live = sel, liveKeyOf(sel)
	return m.rerunDryRun()
}

func (m *Model) bulkMsg(msg tea.Msg) tea.Cmd {
	b := m.bulk
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
		b.phase, b.op = bulkRunning, msg.res.Operation
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
				m.bulk = nil
			}
			op := msg.op
			text := fmt.Sprintf("bulk %s %s: %s matched, %s %s, %s failed", op.Action, op.Status,
				commas(op.Matched), commas(op.Succeeded), pastTense[op.Action], commas(op.Failed))
			var t tea.Cmd
			if op.Status == engine.OperationFailed {
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

func opDone(s engine.OperationStatus) bool {
	return s == engine.OperationCompleted || s == engine.OperationFailed || s == engine.OperationCancelled
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

func (m *Model) bulkBox(w, h int) []string {
	b := m.bulk
	t := m.theme
	inner := w - 4
	var lines []string
	addWrapped := func(s string, st func(...string) string) {
		for _, l := range wrap(s, inner) {
			lines = append(lines, st(l))
		}
	}
	title := "Bulk " + string(b.action)
	switch b.phase {
	case bulkLoading:
		lines = append(lines, t.DialogHead.Render(title+" — dry run"), t.Muted.Render("counting matching jobs…"))
	case bulkFailed:
		lines = append(lines, t.DialogHead.Render(title+" — failed"))
		addWrapped(termtext.Line(b.err.Error()), t.ErrorText.Render)
		lines = append(lines, "", t.HelpKey.Render("esc")+t.HelpDesc.Render(" close"))
	case bulkPreview, bulkStarting:
		return m.box(m.bulkPreviewLines(inner, h-2), w)
	case bulkRunning, bulkDone:
		op := b.op
		status := string(op.Status)
		if b.stale {
			status += " when last heard"
		}
		lines = append(lines, t.DialogHead.Render(title+" — "+status)+t.Muted.Render(" · op "+termtext.Line(op.ID)))
		frac := 0.0
		if op.Matched > 0 {
			frac = float64(op.Processed) / float64(op.Matched)
		}
		lines = append(lines, m.bar(frac, max(inner-7, 10))+" "+fmt.Sprintf("%3.0f%%", math.Min(frac, 1)*100))
		lines = append(lines, fmt.Sprintf("%s / %s processed · %s ok · %s failed",
			commas(op.Processed), commas(op.Matched), commas(op.Succeeded), commas(op.Failed)))
		rate := "measuring rate…"
		if b.stale {
			rate = "progress unknown: updates are failing — retrying"
		} else if b.rate > 0 {
			left := float64(op.Matched-op.Processed) / b.rate
			rate = fmt.Sprintf("%s · ETA %s", perSecond(b.rate), shortDurUp(time.Duration(math.Max(left, 0)*float64(time.Second))))
		}
		if op.Rate > 0 {
			rate += " · limit " + commas(int64(op.Rate)) + "/s"
		}
		if b.phase == bulkDone {
			rate = "ended"
			if op.StartedAt != nil && op.FinishedAt != nil {
				took := op.FinishedAt.Sub(*op.StartedAt)
				rate = "took " + shortDur(took)
				if took < time.Second {
					rate = fmt.Sprintf("took %.1fs", took.Seconds())
				}
				if s := took.Seconds(); s > 0 {
					rate += " · " + perSecond(float64(op.Processed)/s)
				}
			}
			lines = append(lines, t.Muted.Render(rate))
			if op.Status == engine.OperationFailed && op.Error != "" {
				addWrapped(termtext.Line(op.Error), t.ErrorText.Render)
			}
			lines = append(lines, "", t.HelpKey.Render("esc")+t.HelpDesc.Render(" close"))
			break
		}
		lines = append(lines, t.Muted.Render(rate))
		lines = append(lines, "")
		hint := t.HelpKey.Render("esc") + t.HelpDesc.Render(" hide (keeps running)")
		if b.cancelling {
			hint = t.Muted.Render("cancelling… ") + hint
		} else if m.km.Enabled(keymap.Cancel) {
			hint = t.HelpKey.Render(m.km.B(keymap.Cancel).Help().Key) + t.HelpDesc.Render(" cancel operation · ") + hint
		}
		lines = append(lines, hint)
	}
	return m.box(keepEnds(lines, h-2, 1, 2), w)
}

// cutoffForms is the cutoff field's note: the forms it takes, each an
// example read off the console's clock now, in its zone (a clock time is
// read in it): "tab: before 07:29 (UTC), 15m or 2026-12-05T07:29:06Z";
// while the field has the keys, how to apply what is typed first.
func cutoffForms(now time.Time, typing bool) string {
	zone := " (" + now.Format("MST") + ")"
	stamp := now.Format(time.RFC3339)
	if typing {
		return "enter applies · " + now.Format("15:04") + "[" + now.Format(":05") + "]" + zone + ", 15m or " + stamp
	}
	return "tab: before " + now.Format("15:04") + zone + ", 15m or " + stamp
}

func (m *Model) bulkPreviewLines(inner, h int) []string {
	b := m.bulk
	t := m.theme
	p := b.preview
	var lines []pline
	add := func(prio int, s string) { lines = append(lines, pline{prio: prio, s: s}) }
	groups := 0
	addWrapped := func(prio int, s string, st func(...string) string) {
		groups++
		for _, l := range wrap(s, inner) {
			lines = append(lines, pline{prio: prio, s: st(l), group: groups})
		}
	}
	add(keepAlways, t.DialogHead.Render("Bulk "+string(b.action)+" — dry run"))
	count := commas(p.Matched)
	if p.Estimated {
		count = "about " + count
	}
	noun := "jobs"
	if p.Matched == 1 {
		noun = "job"
	}
	if strings.HasPrefix(b.from, "error group ") {
		// Name the group the way its row does: the action is on it,
		// whatever the list does meanwhile.
		addWrapped(keepContext, b.from, t.Bold.Render)
	}
	action := fmt.Sprintf("%s %s %s (%s)", b.action, count, noun, describeFilter(b.selector))
	actionAt := len(lines)
	addWrapped(keepAlways, action, t.Bold.Render)
	actionEnd := len(lines)
	if p.Estimated {
		add(keepNotes, t.Muted.Render("the count is an estimate past "+commas(engine.DryRunExactLimit)))
	}
	snapAt := len(lines)
	lines = append(lines, m.snapshotLines(inner, false)...)
	snapEnd := len(lines)
	if b.hidden > 0 {
		addWrapped(keepAlways, fmt.Sprintf("%s hidden by the filter — not included", plural(int64(b.hidden), "marked job", "marked jobs")), t.WarnText.Render)
	}
	if len(p.Sample) > 0 {
		add(keepSample, t.Muted.Render("sample:"))
		idw := 8
		for _, j := range p.Sample {
			idw = max(idw, wOf(termtext.Line(j.ID)))
		}
		idw = min(idw, maxIDCol, max(inner-6, 8))
		for i, j := range p.Sample {
			if i == 10 {
				break
			}
			r := newRow(j)
			rest := max(inner-idw-3, 0)
			add(keepSample, "  "+t.Cell.Render(fitEnd(r.id, idw))+" "+
				clip(r.queue+" "+r.kind+" "+t.ErrorText.Render(r.errMsg), rest))
		}
	}
	addWrapped(keepNotes, "the run takes at most these "+count+": jobs that enter the state after this preview are left alone", t.Muted.Render)
	if p.Matched > 0 {
		rate := "jobs/s: no limit · type digits to set one"
		if n := b.ratePerSecond(); n > 0 {
			rate = "jobs/s"
			if p.Matched > int64(n) {
				rate += " · takes about " + shortDurUp(time.Duration(float64(p.Matched)/float64(n)*float64(time.Second)))
			}
		}
		field := b.rateIn
		if b.phase == bulkPreview && !b.cutoffOn {
			field += "▏"
		}
		add(keepAlways, t.Bold.Render("rate ")+t.Cell.Render("["+fitRight(field, maxRateDigits+1)+"]")+" "+
			t.Muted.Render(rate))
	}
	if b.hasCutoff() {
		// The cutoff: a field of its own, its forms said, the clock's
		// zone named (a clock time is read in it).
		field := b.cutoffIn
		if b.cutoffOn {
			field += "▏"
		}
		note := cutoffForms(m.now(), b.cutoffOn)
		// Kept on a short terminal while it has the keys or a cutoff (the
		// action line says it too); else it goes with the notes.
		prio := keepNotes
		if b.cutoffOn || b.cutoffSet != "" || b.cutoffErr != "" {
			prio = keepAlways
		}
		head := t.Bold.Render("cutoff ") + t.Cell.Render("["+fit(field, 9)+"]") + " "
		headW := wOf(head)
		if !b.cutoffOn || headW+wOf(note) <= inner {
			// Out of the field the note is a reminder, cut where the
			// line ends.
			add(prio, head+t.Muted.Render(note))
		} else {
			// In it, the forms are what the typist reads: all of them,
			// on as many lines as they take, under the field.
			groups++
			for i, l := range wrapWords(note, max(inner-headW, 12)) {
				pre := strings.Repeat(" ", headW)
				if i == 0 {
					pre = head
				}
				lines = append(lines, pline{prio: prio, s: pre + t.Muted.Render(l), group: groups})
			}
		}
		if b.cutoffErr != "" {
			addWrapped(keepAlways, b.cutoffErr, t.ErrorText.Render)
		}
	}
	add(keepContext, "")
	switch {
	case b.phase == bulkStarting:
		add(keepAlways, t.Muted.Render("starting…"))
	case p.Matched == 0 && b.hasCutoff() && b.cutoffSet != "" && !b.cutoffOn:
		// A cutoff that leaves nothing is most often a time typed too
		// early: the way to another one is said, not only the way out.
		add(keepAlways, t.Muted.Render("nothing to do")+"  "+t.HelpKey.Render("tab")+t.HelpDesc.Render(" change the cutoff · ")+
			t.HelpKey.Render("esc")+t.HelpDesc.Render(" close"))
	case p.Matched == 0:
		add(keepAlways, t.Muted.Render("nothing to do")+"  "+t.HelpKey.Render("esc")+t.HelpDesc.Render(" close"))
	default:
		add(keepAlways, t.HelpKey.Render(m.km.B(keymap.Confirm).Help().Key)+t.HelpDesc.Render(" start · ")+
			m.rerunHint()+t.HelpKey.Render("esc")+t.HelpDesc.Render(" cancel"))
	}
	must, snap := 0, 0
	for _, l := range lines {
		switch l.prio {
		case keepAlways:
			must++
		case keepSnap:
			snap++
		}
	}
	if len(lines) > h && must+snap+1 > h && snapEnd-snapAt > 1 {
		// The snapshot's lines do not all fit: one short line says it.
		short := m.snapshotLines(inner, true)
		// (They come after the action's lines, which stay where they are.)
		lines = append(append(append([]pline{}, lines[:snapAt]...), short...), lines[snapEnd:]...)
	}
	if must+1 > h && actionEnd-actionAt > 1 {
		// Still too tall: the action says its count on one line, the
		// selector left out (the sample and notes are gone already).
		short := pline{prio: keepAlways, s: t.Bold.Render(clip(fmt.Sprintf("%s %s %s (selector hidden)", b.action, count, noun), inner))}
		lines = append(append(append([]pline{}, lines[:actionAt]...), short), lines[actionEnd:]...)
	}
	return fitPrio(lines, h)
}

// rerunHint names the key that re-runs the dry run, for the preview's
// last line.
func (m *Model) rerunHint() string {
	if !m.km.Enabled(keymap.Refresh) {
		return ""
	}
	t := m.theme
	return t.HelpKey.Render(m.km.B(keymap.Refresh).Help().Key) + t.HelpDesc.Render(" re-run dry run · ")
}

// snapshotLines say that the preview's count is as of its dry run: when
// it counted, and, when the live counts (the state tabs) count the
// selector, how many more match now, which the run leaves out. Where
// they cannot (a selector with more than a state and a queue: kinds, an
// error group, payload filters) the lines claim no figure. short: one
// line, the first of the shorter texts that fits, for a short terminal.
func (m *Model) snapshotLines(inner int, short bool) []pline {
	b := m.bulk
	if b.asOf.IsZero() {
		return nil
	}
	t := m.theme
	clock := b.asOf.UTC().Format("15:04:05")
	age := shortDur(max(m.now().Sub(b.asOf), 0)) + " ago"
	more, known := m.moreSince(b)
	// text is a wrapped text, one group, or with short one line.
	group := 0
	text := func(st func(...string) string, texts ...string) []pline {
		group--
		if short {
			s := texts[len(texts)-1]
			for _, c := range texts {
				if wOf(c) <= inner {
					s = c
					break
				}
			}
			return []pline{{prio: keepSnap, s: st(s)}}
		}
		var out []pline
		for _, l := range wrap(texts[0], inner) {
			out = append(out, pline{prio: keepSnap, s: st(l), group: group})
		}
		return out
	}
	switch {
	case !known:
		return text(t.Muted.Render,
			"as of "+clock+" ("+age+"); jobs that arrived since are not included",
			"as of "+clock+"; jobs that arrived since are not included",
			"as of "+clock+"; jobs that arrived since not included",
			"as of "+clock+"; later arrivals not included")
	case more <= 0:
		return text(t.Muted.Render, "as of "+clock+" ("+age+")", "as of "+clock)
	}
	n, state := commas(more), string(b.live.state)
	if short {
		return text(t.WarnText.Render,
			"as of "+clock+" ("+age+") · "+n+" more "+state+" since — not included",
			"as of "+clock+" · "+n+" more "+state+" since — not included",
			"as of "+clock+" · "+n+" more since, not included",
			"as of "+clock+" · "+n+" more, not included",
			"as of "+clock+" · +"+n+" not included")
	}
	rerun := ""
	if m.km.Enabled(keymap.Refresh) {
		rerun = "; " + m.km.B(keymap.Refresh).Help().Key + " counts again"
	}
	return append(text(t.Muted.Render, "as of "+clock+" ("+age+")"),
		text(t.WarnText.Render, n+" more "+state+" since — not included"+rerun)...)
}
