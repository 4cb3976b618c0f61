package tui

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
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
	b := &sheetLines{w: w, t: m.theme, sections: s.sections[:0]}
	s.nSteps, s.stepLineAt, s.stepsEnd = 0, s.stepLineAt[:0], 0
	switch {
	case s.err != nil && s.detail == nil:
		b.unread(s.id, s.err)
	case s.detail == nil || s.detail.Job == nil:
		b.loading(s.id)
	default:
		j, now := s.detail.Job, m.now()
		m.sheetHeader(b, j, s.detail.HeldBy)
		b.compareSection(m.km, attemptRuns(j), s.compare, s.detail.Timeline)
		b.lifecycle(now, j, s.detail.DeleteAt, s.detail.Expiring)
		b.timeline(s.detail.Timeline)
		b.attemptErrors(j.Errors)
		m.sheetMetadata(b, j.Metadata)
		cp := m.sheetCheckpoint(b, j)
		m.sheetLinks(b, cp)
		m.sheetPayload(b)
		s.payloadAt = len(b.out)
	}
	s.info, s.infoW, s.infoOK, s.sections = b.out, w, true, b.sections
	return s.info
}

// sheetLines writes the sheet's lines above the payload: each clipped
// to w, with the line each section's heading is on.
type sheetLines struct {
	w        int
	t        *themes.Theme
	out      []string
	sections []int
}

func (b *sheetLines) add(l string) { b.out = append(b.out, clip(l, b.w)) }

// section starts a section under its heading, a blank line above it.
func (b *sheetLines) section(title string) {
	if len(b.out) > 0 {
		b.out = append(b.out, "")
	}
	b.sections = append(b.sections, len(b.out))
	b.add(b.t.SheetHead.Render(title))
}

// fieldIn is a label and its value after a gutter (the links' cursor).
func (b *sheetLines) fieldIn(gutter, label, value string) {
	lw, gw := 12, lipgloss.Width(gutter)
	first := true
	for _, l := range wrap(value, max(b.w-gw-lw-1, 8)) {
		if first {
			b.add(gutter + b.t.Label.Render(fit(label, lw)) + " " + b.t.Value.Render(l))
			first = false
		} else {
			b.add(strings.Repeat(" ", gw+lw+1) + b.t.Value.Render(l))
		}
	}
}

func (b *sheetLines) field(label, value string) { b.fieldIn("", label, value) }

// unread is the sheet of a job that could not be read: its id and why.
func (b *sheetLines) unread(id string, err error) {
	b.add(b.t.SheetHead.Render("job " + termtext.Line(id)))
	for _, l := range wrap(termtext.Line(err.Error()), b.w) {
		b.add(b.t.ErrorText.Render(l))
	}
}

// loading is the sheet of a job still being read.
func (b *sheetLines) loading(id string) {
	b.add(b.t.SheetHead.Render("job " + termtext.Line(id)))
	b.add(b.t.Muted.Render("loading…"))
}

// sheetHeader is the job's id and the fields above the sections: its
// state, what it waits for, the limit that holds it back, queue, kind and
// attempts.
func (m *Model) sheetHeader(b *sheetLines, j *engine.Job, heldBy string) {
	t := b.t
	for _, l := range wrap("job "+termtext.Line(j.ID), b.w) {
		b.add(t.SheetHead.Render(l))
	}
	state := t.State(string(j.State)).Render(string(j.State))
	// The reason says what the state does not (attempts_exhausted under
	// archived); a reason that is the state's own name says nothing.
	if j.TerminalReason != "" && string(j.TerminalReason) != string(j.State) {
		state += t.Muted.Render(" · " + string(j.TerminalReason))
	}
	b.add(t.Label.Render(fit("state", 12)) + " " + state)
	if wt := engine.WaitOf(j); wt != nil {
		b.field("waits for", termtext.Line(waitLine(wt)))
		if k := m.km.B(keymap.Signal).Help().Key; wt.Kind == engine.WaitKindSignal && m.km.Enabled(keymap.Signal) {
			b.add(strings.Repeat(" ", 13) + t.Muted.Render(k+" sends it (payload in the editor)"))
		}
	}
	// An available job a limit across processes holds back waits,
	// uncharged: the sheet says which limit, and how full it is.
	if heldBy != "" {
		b.field("held by", termtext.Line(heldBy))
	}
	b.field("queue", termtext.Line(j.Queue))
	b.field("kind", fmt.Sprintf("%s (schema v%d)", termtext.Line(j.Kind), j.SchemaVersion))
	// Attempts spent and crashes are two budgets; the timeline numbers
	// runs (#1, #2 … one per claim: failures, crashes and lost leases
	// alike). A quarantined job read "0/3 · crashes 3" over #1 … #8:
	// where the runs are more than the two count, they are said too, with
	// how many charged neither.
	attempt := fmt.Sprintf("%d/%d · crashes %d", j.AttemptShown(), j.MaxAttempts, j.CrashAttempt)
	if free := j.Fence - int64(j.AttemptShown()+j.CrashAttempt); free > 0 {
		attempt += fmt.Sprintf(" · %s (timeline #), %s charged nothing", plural(j.Fence, "run", "runs"), commas(free))
	}
	b.field("attempt", attempt+fmt.Sprintf(" · priority %d", j.Priority))
	// The trace the job was enqueued in, to open in the operator's
	// tracing UI; each failed attempt's own is under its error.
	if id := traceID(j); id != "" {
		b.field("trace", id)
		if m.km.Enabled(keymap.CopyTrace) {
			b.add(strings.Repeat(" ", 13) + b.t.Muted.Render(m.km.B(keymap.CopyTrace).Help().Key+" copies it"))
		}
	}
}

// traceMetaKey is the key of a job's metadata that carries the W3C trace
// context of its enqueue (sluiceotel.MetadataKey; the console does not
// import OpenTelemetry).
const traceMetaKey = "sluice.trace"

// traceID is the id of the trace job j was enqueued in, from its
// metadata's traceparent; empty when it carries none (or the role hides
// metadata).
func traceID(j *engine.Job) string {
	if len(j.Metadata) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(j.Metadata, &m) != nil {
		return ""
	}
	var tc struct {
		Traceparent string `json:"traceparent"`
	}
	if json.Unmarshal(m[traceMetaKey], &tc) != nil {
		return ""
	}
	return traceIDOf(tc.Traceparent)
}

// traceIDOf is the trace id of a W3C traceparent (version 00:
// 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>); empty when tp
// is not one or its id is all zeros.
func traceIDOf(tp string) string {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || strings.Trim(parts[1], "0") == "" {
		return ""
	}
	for _, c := range parts[1] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return ""
		}
	}
	return parts[1]
}

// lifecycle is the job's times, lease, fingerprint, version and tags;
// deleteAt is when retention deletes a finished job; expiring, that it
// does so within the engine's warning window.
func (b *sheetLines) lifecycle(now time.Time, j *engine.Job, deleteAt *time.Time, expiring bool) {
	b.section("lifecycle")
	b.field("created", stamp(now, j.CreatedAt))
	if j.AttemptedAt != nil {
		b.field("attempted", stamp(now, *j.AttemptedAt))
	}
	if j.AttemptedBy != "" {
		b.field("worker", termtext.Line(j.AttemptedBy))
	}
	b.field("in state", stamp(now, j.StateChangedAt))
	if j.FinalizedAt != nil {
		b.field("finalized", stamp(now, *j.FinalizedAt))
	}
	if j.State.Terminal() {
		line := retentionLine(now, termtext.Line(j.Queue), j.State, deleteAt)
		if expiring {
			line = b.t.WarnText.Render("expiring: " + line)
		}
		b.field("retention", line)
	}
	if !j.State.Terminal() {
		b.field("scheduled", stamp(now, j.ScheduledAt))
	}
	if j.Deadline != nil {
		b.field("deadline", stamp(now, *j.Deadline))
	}
	if j.Timeout > 0 {
		b.field("timeout", j.Timeout.String())
	}
	if j.Lease != nil {
		b.field("lease", fmt.Sprintf("%s until %s", termtext.Line(j.Lease.WorkerID), stamp(now, j.Lease.ExpiresAt)))
	}
	b.field("fingerprint", shortFP(termtext.Line(j.Fingerprint)))
	if j.UniqueKey != "" {
		// Whole, so that it can be pasted into a unique: filter.
		b.field("unique key", termtext.Line(j.UniqueKey))
	}
	b.field("version", fmt.Sprintf("%d · fence %d", j.Version, j.Fence))
	if len(j.Tags) > 0 {
		tags := make([]string, len(j.Tags))
		for i, tg := range j.Tags {
			tags[i] = termtext.Line(tg)
		}
		b.field("tags", strings.Join(tags, ", "))
	}
}

// timeline is the job's events, each with the time since the last.
func (b *sheetLines) timeline(events []engine.Event) {
	t := b.t
	b.section(fmt.Sprintf("timeline (%d)", len(events)))
	var prev time.Time
	for _, ev := range events {
		delta := ""
		if !prev.IsZero() {
			delta = "+" + shortDur(ev.At.Sub(prev))
		}
		prev = ev.At
		head := t.Muted.Render(ev.At.UTC().Format("15:04:05")) + " " + t.Subtle.Render(fitRight(delta, 5)) + " " +
			eventStyle(t, ev.Kind).Render(fit(string(ev.Kind), 14))
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
		b.add(head + " " + t.Muted.Render(strings.Join(extra, " · ")))
		if ev.Message != "" {
			// A claim's message is a note, not an error.
			st := t.ErrorText
			if ev.Kind == engine.EventClaimed {
				st = t.Muted
			}
			for _, l := range wrap(termtext.Line(ev.Message), max(b.w-6, 8)) {
				b.add("      " + st.Render(l))
			}
		}
	}
}

// attemptErrors is the job's errors, each with its trace cut short;
// none, no section.
func (b *sheetLines) attemptErrors(errs []engine.AttemptError) {
	if len(errs) == 0 {
		return
	}
	t := b.t
	b.section(fmt.Sprintf("errors (%d)", len(errs)))
	for _, e := range errs {
		kind := "error"
		if e.Crash {
			kind = "crash"
		}
		head := fmt.Sprintf("#%d %s · %s", e.Attempt, kind, e.At.UTC().Format("15:04:05"))
		if e.Worker != "" {
			head += " · " + termtext.Line(e.Worker)
		}
		b.add(t.Bold.Render(head))
		for _, l := range wrap(termtext.Line(e.Message), max(b.w-2, 8)) {
			b.add("  " + t.ErrorText.Render(l))
		}
		if id := traceIDOf(e.Ref); id != "" {
			b.add("  " + t.Muted.Render("trace "+id))
		}
		if e.Trace != "" {
			tl := termtext.Lines(strings.TrimRight(e.Trace, "\n"))
			const maxTrace = 12
			for i, l := range tl {
				if i == maxTrace {
					b.add("    " + t.Muted.Render(fmt.Sprintf("… %d more trace lines", len(tl)-maxTrace)))
					break
				}
				b.add("    " + t.Muted.Render(clip(l, max(b.w-4, 1))))
			}
		}
	}
}

// sheetMetadata is the job's metadata, as JSON; empty, no section.
func (m *Model) sheetMetadata(b *sheetLines, md json.RawMessage) {
	if m.sess.hidePayload {
		b.section("metadata")
		b.add(b.t.Muted.Render("hidden for your role"))
	} else if len(md) > 0 && string(md) != "{}" && string(md) != "null" {
		b.section("metadata")
		for _, l := range prettyJSONLines(md) {
			b.add(colorJSONLine(clipPlain(l, b.w), b.t))
		}
	}
}

// sheetCheckpoint is the steps of the job's checkpoint, or the
// checkpoint as JSON where it is not a workflow's. It returns the
// workflow's checkpoint, nil for none, for the links it names.
func (m *Model) sheetCheckpoint(b *sheetLines, j *engine.Job) *engine.Checkpoint {
	if len(j.Checkpoint) == 0 || string(j.Checkpoint) == "null" {
		return nil
	}
	cp, err := engine.ParseCheckpoint(j.Checkpoint)
	if err != nil {
		b.section("checkpoint")
		lines := prettyJSONLines(j.Checkpoint)
		for i, l := range lines {
			if i == 30 {
				b.add(b.t.Muted.Render(fmt.Sprintf("… %d more lines", len(lines)-30)))
				break
			}
			b.add(colorJSONLine(clipPlain(l, b.w), b.t))
		}
		return nil
	}
	if len(cp.Steps) > 0 || j.State == engine.StateRunning {
		m.sheetSteps(b, j, &cp)
	}
	return &cp
}

// sheetSteps is the workflow's steps, the picked one marked, and
// records where each is (nSteps, stepLineAt, stepsEnd).
func (m *Model) sheetSteps(b *sheetLines, j *engine.Job, cp *engine.Checkpoint) {
	s := &m.sheet
	b.section(fmt.Sprintf("steps (%d)", len(cp.Steps)))
	s.nSteps = len(cp.Steps)
	s.stepPick = min(s.stepPick, s.nSteps)
	lines, starts := m.stepLines(j, cp, b.w, s.stepPick-1)
	for _, at := range starts {
		s.stepLineAt = append(s.stepLineAt, len(b.out)+at)
	}
	for _, l := range lines {
		b.add(l)
	}
	if hint := m.stepHint(); hint != "" && s.nSteps > 0 {
		b.add(hint)
	}
	s.stepsEnd = len(b.out)
}

// sheetLinks is the jobs the sheet links to (cp's among them), the
// picked one marked while they are in focus, and records them and where
// they are (links, linksAt, linkLineAt, linksEnd).
func (m *Model) sheetLinks(b *sheetLines, cp *engine.Checkpoint) {
	s := &m.sheet
	s.links = append(sheetLinks(s.detail, cp), childLinks(cp, s.children)...)
	s.linksAt, s.linksEnd, s.linkLineAt = 0, 0, s.linkLineAt[:0]
	if n := s.followable(); s.linkPick >= n {
		s.linkPick = max(n-1, 0)
	}
	if len(s.links) == 0 {
		return
	}
	b.section("links")
	s.linksAt = len(b.out) - 1
	for i, l := range s.links {
		s.linkLineAt = append(s.linkLineAt, len(b.out))
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
				gutter = b.t.Accent.Render("›") + " "
			}
		}
		b.fieldIn(gutter, l.label, v)
	}
	m.linksHint(b)
	s.linksEnd = len(b.out) - 1
}

// linksHint is the line under the links: what enter follows while they
// are in focus, else how to pick one.
func (m *Model) linksHint(b *sheetLines) {
	s := &m.sheet
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
		b.add(b.t.InfoText.Render(hint))
	case open != "" && pick != "":
		b.add(b.t.Muted.Render(pick + " picks a link from anywhere on the sheet, then " + open + " follows it"))
	}
}

// sheetPayload is the payload section's heading and what stands for the
// payload until its lines follow: how to show it, or how many it has.
func (m *Model) sheetPayload(b *sheetLines) {
	s, t := &m.sheet, b.t
	b.section("payload")
	switch {
	case m.sess.hidePayload:
		b.add(t.Muted.Render("hidden for your role"))
	case !s.showPayload:
		if k := m.km.B(keymap.Payload).Help().Key; k != "" {
			b.add(t.Muted.Render(k + " shows the payload"))
		}
	case s.payloadLoading:
		b.add(t.Muted.Render("loading payload…"))
	case s.payloadErr != nil:
		b.add(t.ErrorText.Render(clip(termtext.Line(s.payloadErr.Error()), b.w)))
	default:
		b.add(t.Muted.Render(fmt.Sprintf("%s lines", commas(int64(len(s.payload))))))
	}
}

func eventStyle(t *themes.Theme, k engine.EventKind) lipgloss.Style {
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
