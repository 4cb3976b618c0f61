package tui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// The workflow parts of the detail sheet: the steps of a job's checkpoint,
// and the links between jobs (dead letters, forks, retries) that enter
// follows.

// sheetLink is one line of the sheet's links section.
type sheetLink struct {
	label, id, note string
	// more: the line that says how many children are not listed; it
	// names no job.
	more bool
}

// sheetLinks lists a job's links, in the order the sheet shows them.
func sheetLinks(d *engine.JobDetail, cp *engine.Checkpoint) []sheetLink {
	j := d.Job
	var out []sheetLink
	if p, ok := engine.ParentOf(j.ID); ok {
		out = append(out, sheetLink{label: "parent", id: p, note: "spawned this job"})
	}
	if d.DeadLetter != "" {
		out = append(out, sheetLink{label: "dead letter", id: d.DeadLetter, note: "handles its death"})
	}
	if j.DeadLetterOf != "" {
		out = append(out, sheetLink{label: "dead job", id: j.DeadLetterOf, note: "whose death this triages"})
	}
	if cp != nil && cp.ForkedFrom != nil {
		out = append(out, sheetLink{label: "forked from", id: cp.ForkedFrom.JobID, note: fmt.Sprintf("from step %d", cp.ForkedFrom.Step)})
	}
	if cp != nil {
		for _, f := range cp.Forks {
			out = append(out, sheetLink{label: "replayed as", id: f.JobID, note: fmt.Sprintf("from step %d", f.Step)})
		}
	}
	if j.RetryOf != "" {
		out = append(out, sheetLink{label: "retry of", id: j.RetryOf})
	}
	if j.SupersededBy != "" {
		out = append(out, sheetLink{label: "superseded by", id: j.SupersededBy})
	}
	return out
}

// stepLines renders a checkpoint's steps at width w: mark, position,
// name, state, duration, attempts and crashes, and the error of a step
// that failed. The step a running job is on is marked ▶. With a step
// picked (cursor, 0-based, ≥ 0) every step gains a gutter, › on the
// picked one.
// starts is the line each step begins on.
func (m *Model) stepLines(j *engine.Job, cp *engine.Checkpoint, w, cursor int) (out []string, starts []int) {
	t := m.theme
	running := -1
	if j.State == engine.StateRunning {
		running = len(cp.Steps)
		for i, s := range cp.Steps {
			if s.State != engine.StepCompleted {
				running = i
				break
			}
		}
	}
	nameW := 4
	for _, s := range cp.Steps {
		nameW = max(nameW, min(len(termtext.Line(s.Name)), 20))
	}
	gutter := func(i int) string {
		switch {
		case cursor < 0:
			return ""
		case i == cursor:
			return t.Accent.Render("›") + " "
		}
		return "  "
	}
	for i, s := range cp.Steps {
		starts = append(starts, len(out))
		mark, st := "✓", t.OKText
		switch s.State {
		case engine.StepFailed:
			mark, st = "✗", t.ErrorText
		case engine.StepCrashed:
			mark, st = "!", t.WarnText
		case engine.StepWaiting:
			mark, st = "…", t.InfoText
		}
		state := string(s.State)
		if i == running {
			mark, st, state = "▶", t.InfoText, "running"
		}
		name := termtext.Line(s.Name)
		if name == "" {
			name = "?"
		}
		facts := []string{}
		if s.Duration > 0 {
			facts = append(facts, stepDur(s.Duration))
		}
		facts = append(facts, plural(int64(s.Attempts), "run", "runs"))
		if s.Crashes > 0 {
			facts = append(facts, plural(int64(s.Crashes), "crash", "crashes"))
		}
		nameSt := t.Value
		if i == cursor {
			nameSt = t.Accent
		}
		line := gutter(i) + st.Render(mark) + " " + t.Muted.Render(fitRight(fmt.Sprint(i+1), 2)) + " " + nameSt.Render(fit(name, nameW)) +
			" " + st.Render(fit(state, 9)) + " " + t.Muted.Render(strings.Join(facts, " · "))
		out = append(out, clip(line, w))
		if s.Error != "" && s.State != engine.StepCompleted {
			for _, l := range wrap(termtext.Line(s.Error), max(w-5, 8)) {
				out = append(out, clip(gutter(-1)+"     "+t.ErrorText.Render(l), w))
			}
		}
	}
	if running == len(cp.Steps) {
		out = append(out, clip(gutter(-1)+t.InfoText.Render("▶")+" "+t.Muted.Render(fitRight(fmt.Sprint(running+1), 2))+" "+
			t.Muted.Render("next step, running"), w))
	}
	return out, starts
}

// stepHint is the line under the steps: how to pick a step and replay
// from it, or what the replay key does with the picked one. Empty where
// replay is not allowed (read-only, viewers) or its keys are unbound.
func (m *Model) stepHint() string {
	t, km, s := m.theme, m.km, &m.sheet
	if !km.Enabled(keymap.ReplayStep) {
		return ""
	}
	r := km.B(keymap.ReplayStep).Help().Key
	if s.stepPick > 0 {
		return t.InfoText.Render(fmt.Sprintf("%s previews a replay from step %d", r, s.stepPick))
	}
	if !km.Enabled(keymap.StepDown) {
		return ""
	}
	return t.Muted.Render(km.B(keymap.StepDown).Help().Key + " picks a step, then " + r + " replays from it")
}

// moveStep moves the sheet's step cursor d steps; the first move picks
// the first step (down) or the last (up).
func (m *Model) moveStep(d int) tea.Cmd {
	s := &m.sheet
	if s.open && s.linkFocus {
		// The links are in focus (]): the keys pick the link enter
		// follows, a parent's children among them.
		s.moveLink(d)
		return nil
	}
	if !s.open || s.nSteps == 0 || !m.km.Enabled(keymap.ReplayStep) {
		// A step is picked to replay from: without replay, nothing to
		// pick.
		return nil
	}
	switch {
	case s.stepPick == 0 && d > 0:
		s.stepPick = 1
	case s.stepPick == 0:
		s.stepPick = s.nSteps
	default:
		s.stepPick = min(max(s.stepPick+d, 1), s.nSteps)
	}
	s.jumpToStep = true
	s.invalidate()
	return nil
}

// replayStep previews a replay of the sheet's job from the picked step.
func (m *Model) replayStep() tea.Cmd {
	s := &m.sheet
	if m.sess.readOnly || !s.open || s.id == "" {
		return nil
	}
	if j, why, info := m.oneJob(); j == nil {
		// Its steps are not drawn yet: the last job's count is no answer.
		return m.noJob("replay: "+why, info)
	}
	if s.nSteps == 0 {
		return m.toastErr("replay: this job has no recorded steps (it is not a workflow, or no step ran); r retries it")
	}
	if s.stepPick < 1 || s.stepPick > s.nSteps {
		k := m.km.B(keymap.StepDown).Help().Key
		if k == "" {
			return m.toastErr("replay: no step picked (or :replay N)")
		}
		return m.toastErr("replay: " + k + " picks the step to replay from first")
	}
	return m.replayPreview(s.id, s.stepPick, nil)
}

// linkAtTop is the job enter follows: the picked link (the first until
// J/K pick another), when ] has brought the links section into focus; ""
// otherwise.
func (s *sheetView) linkAtTop() string {
	if !s.linkFocus || s.linkPick >= s.followable() {
		return ""
	}
	return s.links[s.linkPick].id
}

// followable is how many of the links name a job: all but the "… N
// more" line that closes a long list of children.
func (s *sheetView) followable() int {
	n := len(s.links)
	if n > 0 && s.links[n-1].more {
		n--
	}
	return n
}

// moveLink moves the link cursor d links, within the followable ones.
func (s *sheetView) moveLink(d int) {
	n := s.followable()
	if n == 0 {
		return
	}
	s.linkPick = min(max(s.linkPick+d, 0), n-1)
	s.jumpToLink = true
	s.invalidate()
}

// stepDur is a step's duration: steps are often shorter than a second.
func stepDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Second:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return shortDur(d)
}

// kindCell is a row's kind, with a dlq chip on a dead-letter handler job.
func kindCell(j *engine.Job) string {
	if engine.IsDeadLetter(j.ID) || j.DeadLetterOf != "" {
		return "[dlq] " + termtext.Line(j.Kind)
	}
	return termtext.Line(j.Kind)
}

// stepCrashText leads a fingerprint's last crash with its crashes per
// workflow step ("in ship ×3, pack ×1: "), most first.
func stepCrashText(fp *engine.Fingerprint) string {
	if len(fp.StepCrashes) == 0 {
		return ""
	}
	names := make([]string, 0, len(fp.StepCrashes))
	for n := range fp.StepCrashes {
		names = append(names, n)
	}
	sort.Slice(names, func(a, b int) bool {
		ca, cb := fp.StepCrashes[names[a]], fp.StepCrashes[names[b]]
		if ca != cb {
			return ca > cb
		}
		return names[a] < names[b]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s ×%d", termtext.Line(n), fp.StepCrashes[n])
	}
	return "in " + strings.Join(parts, ", ") + ": "
}
