package tui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/aymanbagabas/go-udiff"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// Attempts side by side: the compare key (=) on the sheet puts two of the
// job's runs next to each other at the sheet's top — the last and the one
// before it; again, the one before that; past the first, off. It shows
// when each started and ended and how long it ran, its worker, outcome and
// trace, the payload edits made between them (the payload each ran with
// is the one before them and the one after), and their errors as a line
// diff. Everything comes from the detail the sheet holds: no call.

// attemptRun is one run of a job: an entry of its errors, or its last run
// when that left none (it completed, is running, was cancelled).
type attemptRun struct {
	n       int
	outcome string
	started *time.Time
	ended   *time.Time
	worker  string
	message string
	trace   string
	ref     string
}

// attemptRuns lists j's runs, oldest first.
func attemptRuns(j *engine.Job) []attemptRun {
	var out []attemptRun
	for _, e := range j.Errors {
		r := attemptRun{n: e.Attempt, outcome: "error", started: e.Started, worker: e.Worker,
			message: e.Message, trace: e.Trace, ref: e.Ref}
		if e.Crash {
			r.outcome = "crash"
		}
		at := e.At
		r.ended = &at
		out = append(out, r)
	}
	if j.AttemptedAt == nil {
		return out
	}
	// The last claim left no entry when its run is the one in progress
	// or it ended without an error: a later run than every entry's.
	if n := len(out); n > 0 && out[n-1].started != nil && !j.AttemptedAt.After(*out[n-1].started) {
		return out
	}
	if n := len(out); n > 0 && out[n-1].started == nil && !j.AttemptedAt.After(*out[n-1].ended) {
		return out
	}
	last := attemptRun{n: int(j.Fence), outcome: string(j.State), started: j.AttemptedAt, worker: j.AttemptedBy}
	if last.n <= 0 {
		last.n = j.Attempt
	}
	if j.State.Terminal() && j.FinalizedAt != nil {
		last.ended = j.FinalizedAt
	}
	return append(out, last)
}

// compareAttempts moves the sheet's comparison one run further back, or
// turns it off past the first.
func (m *Model) compareAttempts() tea.Cmd {
	s := &m.sheet
	if !s.open || s.detail == nil || s.detail.Job == nil {
		return m.toast("open a job's sheet (enter) to compare its attempts")
	}
	runs := attemptRuns(s.detail.Job)
	if len(runs) < 2 {
		return m.toast(fmt.Sprintf("job %s has %d run: nothing to compare", termtext.Line(s.id), len(runs)))
	}
	s.compare++
	if s.compare >= len(runs) {
		s.compare = 0
	}
	s.scroll, s.focusSec = 0, -1
	s.invalidate()
	return nil
}

// compareSection draws runs[len-1-back] beside the last run.
func (b *sheetLines) compareSection(km *keymap.KeyMap, runs []attemptRun, back int, events []engine.Event) {
	if back <= 0 || back >= len(runs) {
		return
	}
	t := b.t
	a, z := runs[len(runs)-1-back], runs[len(runs)-1]
	b.section(fmt.Sprintf("attempts #%d ↔ #%d", a.n, z.n))
	hint := km.B(keymap.CompareAttempts).Help().Key
	if back+1 < len(runs) {
		b.add(t.Muted.Render(hint + ": the run before #" + fmt.Sprint(a.n)))
	} else {
		b.add(t.Muted.Render(hint + ": close"))
	}
	col := max((b.w-14)/2, 8)
	row := func(label, x, y string) {
		b.add(t.Label.Render(fit(label, 12)) + " " + t.Value.Render(fit(x, col)) + " " + t.Value.Render(clip(y, col)))
	}
	row("", "#"+fmt.Sprint(a.n), "#"+fmt.Sprint(z.n))
	row("outcome", a.outcome, z.outcome)
	row("started", clock(a.started), clock(z.started))
	row("ended", clock(a.ended), clock(z.ended))
	row("ran", ranFor(a), ranFor(z))
	row("worker", termtext.Line(a.worker), termtext.Line(z.worker))
	if ta, tz := traceIDOf(a.ref), traceIDOf(z.ref); ta != "" || tz != "" {
		row("trace", ta, tz)
	}
	b.editsBetween(a, z, events)
	b.errorDiff(a, z)
}

// clock is a run's time of day, or a dash where it is not known.
func clock(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.UTC().Format("15:04:05.000")
}

// ranFor is how long a run ran: to its end, or so far.
func ranFor(r attemptRun) string {
	switch {
	case r.started == nil:
		return "—"
	case r.ended == nil:
		return "still running"
	}
	// Runs are compared by their length: finer than the sheet's ages.
	switch d := r.ended.Sub(*r.started); {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	default:
		return shortDur(d)
	}
}

// editsBetween lists the payload edits made after run a began and before
// run z did: what changed in the payload between the two.
func (b *sheetLines) editsBetween(a, z attemptRun, events []engine.Event) {
	t := b.t
	from := a.ended
	if a.started != nil {
		from = a.started
	}
	var edits []engine.Event
	for _, ev := range events {
		if ev.Kind != engine.EventPayloadEdited || (from != nil && ev.At.Before(*from)) ||
			(z.started != nil && !ev.At.Before(*z.started)) {
			continue
		}
		edits = append(edits, ev)
	}
	if len(edits) == 0 {
		b.field("payload", "the same (no edit between them)")
		return
	}
	b.field("payload", fmt.Sprintf("edited %d× between them", len(edits)))
	for _, ev := range edits {
		head := "  " + ev.At.UTC().Format("15:04:05")
		if ev.Actor != "" {
			head += " " + termtext.Line(ev.Actor)
		}
		b.add(t.Muted.Render(head))
		for _, l := range wrap(termtext.Line(ev.Message), max(b.w-6, 8)) {
			b.add("      " + t.Value.Render(l))
		}
	}
}

// errorDiff is the two runs' errors — message and trace — as a line
// diff: − for a's lines, + for z's, the shared ones as they are.
func (b *sheetLines) errorDiff(a, z attemptRun) {
	t := b.t
	text := func(r attemptRun) string {
		if r.message == "" && r.trace == "" {
			return ""
		}
		lines := termtext.Lines(r.message)
		if r.trace != "" {
			lines = append(lines, termtext.Lines(strings.TrimRight(r.trace, "\n"))...)
		}
		return strings.Join(lines, "\n") + "\n"
	}
	x, y := text(a), text(z)
	switch {
	case x == "" && y == "":
		b.field("errors", "none")
		return
	case x == y:
		b.field("errors", "the same")
		for _, l := range strings.Split(strings.TrimSuffix(x, "\n"), "\n") {
			b.add("    " + t.ErrorText.Render(clip(l, max(b.w-4, 1))))
		}
		return
	}
	b.field("errors", fmt.Sprintf("− #%d  + #%d", a.n, z.n))
	d, err := udiff.ToUnifiedDiff("a", "z", x, udiff.Lines(x, y), 2)
	if err != nil {
		b.add("    " + t.ErrorText.Render(err.Error()))
		return
	}
	for i, h := range d.Hunks {
		if i > 0 {
			b.add("    " + t.Subtle.Render("…"))
		}
		for _, l := range h.Lines {
			c := clip(strings.TrimSuffix(l.Content, "\n"), max(b.w-4, 1))
			switch l.Kind {
			case udiff.Delete:
				b.add("  " + t.DiffDel.Render("− "+c))
			case udiff.Insert:
				b.add("  " + t.DiffAdd.Render("+ "+c))
			default:
				b.add("    " + t.Muted.Render(c))
			}
		}
	}
}
