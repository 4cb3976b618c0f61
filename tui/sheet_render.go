package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// View renders the sheet into the lines of its size (SetSize), the rule
// on the left included.
func (s *sheetView) View(m *Model) []string {
	w, h := s.w, s.h
	t := m.theme
	inner := max(w-2, 1)
	info := m.sheetInfo(inner)
	if s := &m.sheet; s.anchor != nil {
		if at, ok := anchorLine(info, s.anchor, s.anchorAt); ok {
			s.scroll = at
		}
		s.anchor = nil
	}
	if m.sheet.jumpToPayload && m.sheet.detail != nil && !m.sheet.payloadLoading {
		m.sheet.scroll = max(m.sheet.payloadAt-1, 0)
		m.sheet.jumpToPayload = false
	}
	if s := &m.sheet; s.jumpToStep && s.stepPick > 0 && s.stepPick <= len(s.stepLineAt) {
		// The picked step in view, with the lines down to the hint under
		// the steps when they fit; else the step's own lines.
		at := s.stepLineAt[s.stepPick-1]
		end := s.stepsEnd - 1
		if end-at+1 > h && s.stepPick < len(s.stepLineAt) {
			end = s.stepLineAt[s.stepPick] - 1
		}
		if end >= s.scroll+h {
			s.scroll = end - h + 1
		}
		if at < s.scroll {
			s.scroll = at
		}
		s.jumpToStep = false
	}
	if s := &m.sheet; s.jumpToLink && s.detail != nil && s.linkFocus && s.linkPick < len(s.linkLineAt) {
		// The picked link in view: the section from its heading, as ]
		// shows it, when it fits; else the link on the top line.
		at := s.linkLineAt[s.linkPick]
		if s.linksEnd-s.linksAt < h {
			s.scroll = s.linksAt
		} else if at >= s.scroll+h || at < s.scroll {
			s.scroll = at
		}
		s.jumpToLink = false
	}
	total := len(info)
	if m.sheet.showPayload {
		total += len(m.sheet.payload)
	}
	m.sheet.maxScroll = max(total-h, 0)
	m.sheet.scroll = min(m.sheet.scroll, m.sheet.maxScroll)
	m.sheet.scroll = max(m.sheet.scroll, 0)
	rule := t.Border.Render("│")
	out := make([]string, 0, h)
	for i := m.sheet.scroll; i < m.sheet.scroll+h; i++ {
		var line string
		switch {
		case i < len(info):
			line = info[i]
		case m.sheet.showPayload && i-len(info) < len(m.sheet.payload):
			line = colorJSONLine(clipPlain(m.sheet.payload[i-len(info)], inner), t)
		}
		out = append(out, rule+" "+line)
	}
	return out
}

// sheetInfo renders (and caches) everything above the payload lines.
func (m *Model) sheetInfo(w int) []string {
	s := &m.sheet
	if s.infoOK && s.infoW == w {
		return s.info
	}
	t := m.theme
	now := m.now()
	var out []string
	add := func(l string) { out = append(out, clip(l, w)) }
	s.sections = s.sections[:0]
	s.nSteps, s.stepLineAt, s.stepsEnd = 0, s.stepLineAt[:0], 0
	section := func(title string) {
		if len(out) > 0 {
			out = append(out, "")
		}
		s.sections = append(s.sections, len(out))
		add(t.SheetHead.Render(title))
	}
	// fieldIn is a label and its value after a gutter (the links' cursor).
	fieldIn := func(gutter, label, value string) {
		lw, gw := 12, lipgloss.Width(gutter)
		first := true
		for _, l := range wrap(value, max(w-gw-lw-1, 8)) {
			if first {
				add(gutter + t.Label.Render(fit(label, lw)) + " " + t.Value.Render(l))
				first = false
			} else {
				add(strings.Repeat(" ", gw+lw+1) + t.Value.Render(l))
			}
		}
	}
	field := func(label, value string) { fieldIn("", label, value) }
	defer func() {
		s.info, s.infoW, s.infoOK = out, w, true
	}()

	if s.err != nil && s.detail == nil {
		add(t.SheetHead.Render("job " + termtext.Line(s.id)))
		for _, l := range wrap(termtext.Line(s.err.Error()), w) {
			add(t.ErrorText.Render(l))
		}
		return out
	}
	if s.detail == nil || s.detail.Job == nil {
		add(t.SheetHead.Render("job " + termtext.Line(s.id)))
		add(t.Muted.Render("loading…"))
		return out
	}
	j := s.detail.Job
	for _, l := range wrap("job "+termtext.Line(j.ID), w) {
		add(t.SheetHead.Render(l))
	}
	state := t.State(string(j.State)).Render(string(j.State))
	// The reason says what the state does not (attempts_exhausted under
	// archived); a reason that is the state's own name says nothing.
	if j.TerminalReason != "" && string(j.TerminalReason) != string(j.State) {
		state += t.Muted.Render(" · " + string(j.TerminalReason))
	}
	add(t.Label.Render(fit("state", 12)) + " " + state)
	if w := engine.WaitOf(j); w != nil {
		field("waits for", termtext.Line(waitLine(w)))
		if k := m.km.B(keymap.Signal).Help().Key; w.Kind == engine.WaitKindSignal && m.km.Enabled(keymap.Signal) {
			add(strings.Repeat(" ", 13) + t.Muted.Render(k+" sends it (payload in the editor)"))
		}
	}
	field("queue", termtext.Line(j.Queue))
	field("kind", fmt.Sprintf("%s (schema v%d)", termtext.Line(j.Kind), j.SchemaVersion))
	// Attempts spent and crashes are two budgets; the timeline numbers
	// runs (#1, #2 … one per claim: failures, crashes and lost leases
	// alike). A quarantined job read "0/3 · crashes 3" over #1 … #8:
	// where the runs are more than the two count, they are said too, with
	// how many charged neither.
	attempt := fmt.Sprintf("%d/%d · crashes %d", j.AttemptShown(), j.MaxAttempts, j.CrashAttempt)
	if free := j.Fence - int64(j.AttemptShown()+j.CrashAttempt); free > 0 {
		attempt += fmt.Sprintf(" · %s (timeline #), %s charged nothing", plural(j.Fence, "run", "runs"), commas(free))
	}
	field("attempt", attempt+fmt.Sprintf(" · priority %d", j.Priority))

	section("lifecycle")
	field("created", stamp(now, j.CreatedAt))
	if j.AttemptedAt != nil {
		field("attempted", stamp(now, *j.AttemptedAt))
	}
	if j.AttemptedBy != "" {
		field("worker", termtext.Line(j.AttemptedBy))
	}
	field("in state", stamp(now, j.StateChangedAt))
	if j.FinalizedAt != nil {
		field("finalized", stamp(now, *j.FinalizedAt))
	}
	if j.State.Terminal() {
		field("retention", retentionLine(now, termtext.Line(j.Queue), j.State, s.detail.DeleteAt))
	}
	if !j.State.Terminal() {
		field("scheduled", stamp(now, j.ScheduledAt))
	}
	if j.Deadline != nil {
		field("deadline", stamp(now, *j.Deadline))
	}
	if j.Timeout > 0 {
		field("timeout", j.Timeout.String())
	}
	if j.Lease != nil {
		field("lease", fmt.Sprintf("%s until %s", termtext.Line(j.Lease.WorkerID), stamp(now, j.Lease.ExpiresAt)))
	}
	field("fingerprint", shortFP(termtext.Line(j.Fingerprint)))
	field("version", fmt.Sprintf("%d · fence %d", j.Version, j.Fence))
	if len(j.Tags) > 0 {
		tags := make([]string, len(j.Tags))
		for i, tg := range j.Tags {
			tags[i] = termtext.Line(tg)
		}
		field("tags", strings.Join(tags, ", "))
	}

	section(fmt.Sprintf("timeline (%d)", len(s.detail.Timeline)))
	var prev time.Time
	for _, ev := range s.detail.Timeline {
		delta := ""
		if !prev.IsZero() {
			delta = "+" + shortDur(ev.At.Sub(prev))
		}
		prev = ev.At
		head := t.Muted.Render(ev.At.UTC().Format("15:04:05")) + " " + t.Subtle.Render(fitRight(delta, 5)) + " " +
			m.eventStyle(ev.Kind).Render(fit(string(ev.Kind), 14))
		var extra []string
		if ev.Attempt > 0 {
			extra = append(extra, fmt.Sprintf("#%d", ev.Attempt))
		}
		if ev.Actor != "" {
			extra = append(extra, termtext.Line(ev.Actor))
		}
		switch ev.Kind {
		case engine.EventRetried, engine.EventReleased, engine.EventCancelled, engine.EventHeld:
			if ev.From != "" && ev.To != "" {
				extra = append(extra, string(ev.From)+"→"+string(ev.To))
			}
		}
		add(head + " " + t.Muted.Render(strings.Join(extra, " · ")))
		if ev.Message != "" {
			// A claim's message is a note, not an error.
			st := t.ErrorText
			if ev.Kind == engine.EventClaimed {
				st = t.Muted
			}
			for _, l := range wrap(termtext.Line(ev.Message), max(w-6, 8)) {
				add("      " + st.Render(l))
			}
		}
	}

	if len(j.Errors) > 0 {
		section(fmt.Sprintf("errors (%d)", len(j.Errors)))
		for _, e := range j.Errors {
			kind := "error"
			if e.Crash {
				kind = "crash"
			}
			head := fmt.Sprintf("#%d %s · %s", e.Attempt, kind, e.At.UTC().Format("15:04:05"))
			if e.Worker != "" {
				head += " · " + termtext.Line(e.Worker)
			}
			add(t.Bold.Render(head))
			for _, l := range wrap(termtext.Line(e.Message), max(w-2, 8)) {
				add("  " + t.ErrorText.Render(l))
			}
			if e.Trace != "" {
				tl := termtext.Lines(strings.TrimRight(e.Trace, "\n"))
				const maxTrace = 12
				for i, l := range tl {
					if i == maxTrace {
						add("    " + t.Muted.Render(fmt.Sprintf("… %d more trace lines", len(tl)-maxTrace)))
						break
					}
					add("    " + t.Muted.Render(clip(l, max(w-4, 1))))
				}
			}
		}
	}

	if m.sess.hidePayload {
		section("metadata")
		add(t.Muted.Render("hidden for your role"))
	} else if len(j.Metadata) > 0 && string(j.Metadata) != "{}" && string(j.Metadata) != "null" {
		section("metadata")
		for _, l := range prettyJSONLines(j.Metadata) {
			add(colorJSONLine(clipPlain(l, w), t))
		}
	}
	var cp *engine.Checkpoint
	if len(j.Checkpoint) > 0 && string(j.Checkpoint) != "null" {
		if c, err := engine.ParseCheckpoint(j.Checkpoint); err == nil {
			cp = &c
			if len(c.Steps) > 0 || j.State == engine.StateRunning {
				section(fmt.Sprintf("steps (%d)", len(c.Steps)))
				s.nSteps = len(c.Steps)
				s.stepPick = min(s.stepPick, s.nSteps)
				lines, starts := m.stepLines(j, cp, w, s.stepPick-1)
				for _, at := range starts {
					s.stepLineAt = append(s.stepLineAt, len(out)+at)
				}
				for _, l := range lines {
					add(l)
				}
				if hint := m.stepHint(); hint != "" && s.nSteps > 0 {
					add(hint)
				}
				s.stepsEnd = len(out)
			}
		} else {
			section("checkpoint")
			lines := prettyJSONLines(j.Checkpoint)
			for i, l := range lines {
				if i == 30 {
					add(t.Muted.Render(fmt.Sprintf("… %d more lines", len(lines)-30)))
					break
				}
				add(colorJSONLine(clipPlain(l, w), t))
			}
		}
	}
	s.links = append(sheetLinks(s.detail, cp), childLinks(cp, s.children)...)
	s.linksAt, s.linksEnd, s.linkLineAt = 0, 0, s.linkLineAt[:0]
	if n := s.followable(); s.linkPick >= n {
		s.linkPick = max(n-1, 0)
	}
	if len(s.links) > 0 {
		section("links")
		s.linksAt = len(out) - 1
		for i, l := range s.links {
			s.linkLineAt = append(s.linkLineAt, len(out))
			v := termtext.Line(l.id)
			if l.note != "" {
				v += " · " + termtext.Line(l.note)
			}
			gutter := ""
			if s.linkFocus {
				// A gutter while the links are in focus, › on the one
				// enter follows.
				gutter = "  "
				if i == s.linkPick {
					gutter = t.Accent.Render("›") + " "
				}
			}
			fieldIn(gutter, l.label, v)
		}
		open, pick := m.km.B(keymap.Open).Help().Key, m.km.B(keymap.Links).Help().Key
		if !m.km.Enabled(keymap.Links) {
			pick = ""
		}
		switch {
		case open != "" && s.linkFocus && s.linkPick < s.followable():
			hint := open + " follows " + termtext.Line(s.links[s.linkPick].id)
			if pick != "" && s.followable() > 1 {
				hint += fmt.Sprintf(" (%d of %d) · %s next", s.linkPick+1, s.followable(), pick)
			}
			add(t.InfoText.Render(hint))
		case open != "" && pick != "":
			add(t.Muted.Render(pick + " picks a link from anywhere on the sheet, then " + open + " follows it"))
		}
		s.linksEnd = len(out) - 1
	}

	section("payload")
	switch {
	case m.sess.hidePayload:
		add(t.Muted.Render("hidden for your role"))
	case !s.showPayload:
		if k := m.km.B(keymap.Payload).Help().Key; k != "" {
			add(t.Muted.Render(k + " shows the payload"))
		}
	case s.payloadLoading:
		add(t.Muted.Render("loading payload…"))
	case s.payloadErr != nil:
		add(t.ErrorText.Render(clip(termtext.Line(s.payloadErr.Error()), w)))
	default:
		add(t.Muted.Render(fmt.Sprintf("%s lines", commas(int64(len(s.payload))))))
	}
	s.payloadAt = len(out)
	return out
}

func (m *Model) eventStyle(k engine.EventKind) lipgloss.Style {
	t := m.theme
	switch k {
	case engine.EventFailed, engine.EventArchived, engine.EventCrashed:
		return t.ErrorText
	case engine.EventQuarantined, engine.EventHeld, engine.EventLeaseLost:
		return t.WarnText
	case engine.EventCompleted:
		return t.OKText
	case engine.EventRetried, engine.EventReleased, engine.EventPayloadEdited, engine.EventCancelled:
		return t.InfoText
	}
	return t.Value
}
