package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// maxRateDigits bounds the rate typed in the preview (9,999,999 jobs/s).
const maxRateDigits = 7

// Lines of the bulk preview, each with the priority at which it goes when
// the terminal is short: what the operator confirms (the title, the
// action with its count, the rate, the confirm key) never goes, so a
// short terminal can never offer y over a count it hid. The line that
// says when the count was taken goes last of the rest.
const (
	keepAlways = iota
	keepSnap
	keepNotes
	keepContext
	keepSample
)

type pline struct {
	prio int
	s    string
	// group joins the lines of one wrapped text (0: none): they go
	// together, so no sentence is left cut in the middle.
	group int
}

// fitPrio fits lines into h rows: lines of the highest priority go
// first, the last of them first, and one line says how many went where
// the first of them was. That line takes a row too: once any go, the
// lines left fit h-1 rows.
func fitPrio(lines []pline, h int) []string {
	if len(lines) <= h {
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = l.s
		}
		return out
	}
	drop := map[int]bool{}
	left := len(lines)
	for prio := keepSample; prio > keepAlways && left+1 > h; prio-- {
		for i := len(lines) - 1; i >= 0 && left+1 > h; i-- {
			if lines[i].prio != prio || drop[i] {
				continue
			}
			for k := range lines {
				if k == i || (lines[i].group != 0 && lines[k].group == lines[i].group) {
					drop[k] = true
					left--
				}
			}
		}
	}
	// A group that went whole may have freed more rows than were
	// needed: the lines that went before it, most important first, come
	// back where they still fit.
	for prio := keepAlways + 1; prio < keepSample; prio++ {
		for i := range lines {
			if lines[i].prio != prio || !drop[i] {
				continue
			}
			var back []int
			for k := range lines {
				if k == i || (lines[i].group != 0 && lines[k].group == lines[i].group) {
					back = append(back, k)
				}
			}
			if left+len(back)+1 > h {
				continue
			}
			for _, k := range back {
				delete(drop, k)
				left++
			}
		}
	}
	out := make([]string, 0, h)
	noted := false
	for i, l := range lines {
		if !drop[i] {
			out = append(out, l.s)
		} else if !noted {
			noted = true
			out = append(out, fmt.Sprintf("… %d lines hidden: the terminal is short", len(drop)))
		}
	}
	return out
}

// wrapWords breaks s into lines of at most w cells at its spaces only (a
// time is not cut at its hyphens); a word wider than w is a line of its
// own, cut where the dialog cuts it.
func wrapWords(s string, w int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case wOf(line)+1+wOf(word) <= w:
			line += " " + word
		default:
			out = append(out, line)
			line = word
		}
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

// keepEnds fits lines into h: when they do not fit, the first head and
// the last tail lines stay (a dialog's title, its action line) and the
// middle is cut, saying how much.
func keepEnds(lines []string, h, head, tail int) []string {
	if len(lines) <= h || h < head+tail+1 {
		return lines
	}
	cut := len(lines) - (h - 1)
	mid := lines[head : len(lines)-tail]
	out := append([]string{}, lines[:head]...)
	out = append(out, mid[:len(mid)-cut]...)
	out = append(out, fmt.Sprintf("… %d lines hidden: the terminal is short", cut))
	return append(out, lines[len(lines)-tail:]...)
}

// bar draws a progress bar frac full, w cells wide.
func (m *Model) bar(frac float64, w int) string {
	frac = math.Max(0, math.Min(frac, 1))
	full := int(math.Round(frac * float64(w)))
	t := m.theme
	if t.Palette.Mono {
		return strings.Repeat("█", full) + strings.Repeat("░", w-full)
	}
	return t.Accent.Render(strings.Repeat("█", full)) + t.Subtle.Render(strings.Repeat("░", w-full))
}

// SetSize sets the box's width and the most lines it may take.
func (b *bulkDialog) SetSize(w, h int) { b.w, b.h = w, h }

// View draws the dialog in its box: the preview, the progress or the
// result, as far as the phase has come.
func (b *bulkDialog) View(m *Model) []string {
	t, w, h := m.theme, b.w, b.h
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
		return dialogBox(m.theme, m.bulkPreviewLines(inner, h-2), w)
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
			if (op.Status == engine.OperationFailed || op.Status == engine.OperationHalted) && op.Error != "" {
				addWrapped(termtext.Line(op.Error), t.ErrorText.Render)
			}
			if op.Status == engine.OperationHalted {
				addWrapped(m.haltedHint(), t.Muted.Render)
			}
			lines = append(lines, "", t.HelpKey.Render("esc")+t.HelpDesc.Render(" close"))
			break
		}
		lines = append(lines, t.Muted.Render(rate))
		if stage := engine.CanaryStageText(op); stage != "" {
			addWrapped(termtext.Line(stage), t.InfoText.Render)
		}
		lines = append(lines, "")
		hint := t.HelpKey.Render("esc") + t.HelpDesc.Render(" hide (keeps running)")
		if b.cancelling {
			hint = t.Muted.Render("cancelling… ") + hint
		} else if m.km.Enabled(keymap.Cancel) {
			hint = t.HelpKey.Render(m.km.B(keymap.Cancel).Help().Key) + t.HelpDesc.Render(" cancel operation · ") + hint
		}
		lines = append(lines, hint)
	}
	return dialogBox(m.theme, keepEnds(lines, h-2, 1, 2), w)
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
	b := m.dlg.bulk
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
	if p.UniqueHeld > 0 {
		// Said before the operator confirms: these retries will be
		// refused, as a single retry's dialog says. The store counted
		// every matched job, not the sample.
		addWrapped(keepAlways, fmt.Sprintf("%d of %d matched are held by a live job, e.g. %s; they will be refused",
			p.UniqueHeld, p.Matched, termtext.Line(p.UniqueHolder)), t.WarnText.Render)
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
		if b.phase == bulkPreview && !b.cutoff.on && !b.start.on && !b.canary.on() {
			field += "▏"
		}
		add(keepAlways, t.Bold.Render("rate ")+t.Cell.Render("["+fitRight(field, maxRateDigits+1)+"]")+" "+
			t.Muted.Render(rate))
	}
	if b.hasCutoff() {
		// The cutoff: a field of its own, its forms said, the clock's
		// zone named (a clock time is read in it).
		field := b.cutoff.shown()
		note := cutoffForms(m.now(), b.cutoff.on)
		// Kept on a short terminal while it has the keys or a cutoff (the
		// action line says it too); else it goes with the notes.
		prio := keepNotes
		if b.cutoff.on || b.cutoffSet != "" || b.cutoff.err != "" {
			prio = keepAlways
		}
		head := t.Bold.Render("cutoff ") + t.Cell.Render("["+fit(field, 9)+"]") + " "
		headW := wOf(head)
		if !b.cutoff.on || headW+wOf(note) <= inner {
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
		if b.cutoff.err != "" {
			addWrapped(keepAlways, b.cutoff.err, t.ErrorText.Render)
		}
	}
	if p.Matched > 0 {
		lines = append(lines, m.startLines(inner)...)
		if b.hasCutoff() {
			lines = append(lines, m.canaryLines(inner)...)
		}
	}
	add(keepContext, "")
	switch {
	case b.phase == bulkStarting:
		add(keepAlways, t.Muted.Render("starting…"))
	case p.Matched == 0 && b.hasCutoff() && b.cutoffSet != "" && !b.cutoff.on:
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

// startLines are the start field: what is typed, and when the run then
// starts ("scheduled for 06:00 (in 3h12m)"), or the forms it takes; kept
// on a short terminal once it has the keys or a time, which is what y
// confirms.
func (m *Model) startLines(inner int) []pline {
	b, t := m.dlg.bulk, m.theme
	field := b.start.shown()
	prio := keepNotes
	if b.start.on || b.startAt != nil || b.start.err != "" {
		prio = keepAlways
	}
	note := t.Muted.Render("now")
	if b.startAt != nil {
		// A time that passed while the dialog stayed open starts at once
		// (the server refuses it past its skew).
		note = t.Muted.Render("now: " + b.start.in + " has passed")
		if mark := engine.StartMark(&engine.Operation{Status: engine.OperationPending, StartAt: b.startAt}, m.now()); mark != "" {
			note = t.Scheduled.Render(mark)
		}
	}
	switch {
	case b.start.on:
		note = t.Muted.Render("enter applies · HH:MM (" + m.now().Format("MST") + ", next) or RFC 3339 · empty: now")
	case b.startAt == nil && m.km.Enabled(keymap.BulkStart):
		note += t.Muted.Render(" · " + m.km.B(keymap.BulkStart).Help().Key + ": start at HH:MM, the run waits for it")
	}
	// As wide as an RFC 3339 time when one is typed.
	fw := min(max(wOf(field), 9), 26)
	out := []pline{{prio: prio, s: clip(t.Bold.Render("start ")+t.Cell.Render("["+fit(field, fw)+"]")+" "+note, inner)}}
	if b.start.err != "" {
		for _, l := range wrap(b.start.err, inner) {
			out = append(out, pline{prio: keepAlways, s: t.ErrorText.Render(l)})
		}
	}
	return out
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
	b := m.dlg.bulk
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
