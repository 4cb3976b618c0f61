package tui

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// defaultBulkAction is what b does to the jobs of some states: retry the
// dead, release the held, cancel the waiting, delete the finished.
func defaultBulkAction(states []engine.State) engine.Action {
	for _, s := range states {
		switch s {
		case engine.StateQuarantined:
			return engine.ActionRelease
		case engine.StateScheduled, engine.StateAvailable, engine.StateRetryable, engine.StateRunning:
			return engine.ActionCancel
		case engine.StateCompleted:
			return engine.ActionDelete
		}
	}
	return engine.ActionRetry
}

var pastTense = map[engine.Action]string{
	engine.ActionRetry:   "retried",
	engine.ActionCancel:  "cancelled",
	engine.ActionDelete:  "deleted",
	engine.ActionRelease: "released",
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// oneJob is the job every one-job action acts on (retry, cancel, delete,
// release, the payload edit, retry with new input, copy, the signal key,
// :signal and :replay): the job the screen shows. With the sheet open
// that is the sheet's job, which may be one a link led to, not the list's
// cursor row (r on a followed link retried the row); without it, the
// cursor's row. While a linked job is still loading there is none: why
// says so, and info tells a wait (a plain toast) from a refusal (an error
// toast).
func (m *Model) oneJob() (j *engine.Job, why string, info bool) {
	if m.screen != scrJobs {
		return nil, "no job under the cursor", false
	}
	r := m.jobs.current()
	if s := &m.sheet; s.open && s.id != "" {
		switch {
		case s.detail != nil && s.detail.Job != nil && s.detail.Job.ID == s.id:
			return s.detail.Job, "", false
		case r != nil && r.job.ID == s.id:
			// The cursor's own job, its sheet on its way: the row is it.
			return r.job, "", false
		case s.err != nil:
			return nil, "the linked job " + termtext.Line(s.id) + " could not be read: " + termtext.Line(s.err.Error()) + " — nothing done", false
		}
		return nil, "still loading the linked job " + termtext.Line(s.id) + " — nothing done", true
	}
	if r == nil {
		return nil, "no job under the cursor", false
	}
	return r.job, "", false
}

// noJob is the toast of a one-job key that has no job to act on.
func (m *Model) noJob(why string, info bool) tea.Cmd {
	if info {
		return m.toast(why)
	}
	return m.toastErr(why)
}

// act confirms and runs an action on the marked jobs, the cursor's job,
// or — when everything matching is selected — every matching job.
func (m *Model) act(a engine.Action) tea.Cmd {
	v := &m.jobs
	if v.selectAll {
		return m.startBulk(a, v.effectiveFilter(), "all jobs matching the filter")
	}
	ids := v.markedIDs()
	marked := len(ids) > 0
	var title string
	var lines []string
	if len(ids) == 0 {
		j, why, info := m.oneJob()
		if j == nil {
			return m.noJob(why, info)
		}
		id := termtext.Line(j.ID)
		// An action the job's state does not take is refused here, not
		// confirmed and then failed (u on an archived job asked "Release
		// job …?" and then said "wrong state").
		if states, err := engine.ActionFrom(a); err == nil && !slices.Contains(states, j.State) {
			from := make([]string, len(states))
			for i, s := range states {
				from[i] = string(s)
			}
			return m.toastErr(fmt.Sprintf("%s applies to %s jobs; %s is %s", a, strings.Join(from, ", "), id, j.State))
		}
		ids = []string{j.ID}
		title = fmt.Sprintf("%s job %s?", titleCase(string(a)), id)
		if a == engine.ActionRetry && j.SupersededBy != "" {
			return m.confirmForcedRetry(j)
		}
		if a == engine.ActionRelease {
			return m.confirmReleaseOne(j.ID, title)
		}
	} else {
		title = fmt.Sprintf("%s %s?", titleCase(string(a)), plural(int64(len(ids)), "marked job", "marked jobs"))
		if hidden := v.hiddenMarks(); hidden > 0 {
			lines = append(lines, m.theme.WarnText.Render(fmt.Sprintf("%s hidden by the filter", plural(int64(hidden), "of them is", "of them are"))))
		}
		for i, id := range ids {
			if i == 5 {
				lines = append(lines, m.theme.Muted.Render(fmt.Sprintf("… and %s more", commas(int64(len(ids)-5)))))
				break
			}
			lines = append(lines, "  "+termtext.Line(id))
		}
		if len(ids) > engine.MaxApplyIDs {
			lines = append(lines, m.theme.Muted.Render(fmt.Sprintf("sent in %d chunks of at most %s", (len(ids)+engine.MaxApplyIDs-1)/engine.MaxApplyIDs, commas(engine.MaxApplyIDs))))
		}
	}
	count := int64(len(ids))
	d := &confirmDialog{
		title: title,
		count: count,
		lines: lines,
		yes: func() tea.Cmd {
			return m.applyCmd(a, ids)
		},
	}
	m.dlg.confirm = d
	switch {
	case a != engine.ActionRetry:
	case marked:
		// Marked jobs: how many a live job holds the key of, said in
		// the dialog while the operator reads it.
		return m.uniqueMarkedCmd(d, ids)
	default:
		if j, _, _ := m.oneJob(); j != nil && j.ID == ids[0] && j.UniqueKey != "" {
			// Whether a live job holds the key, said in the dialog
			// while the operator reads it: the retry would be refused.
			return m.uniqueHolderCmd(d, j.ID, j.UniqueKey)
		}
	}
	return nil
}

// uniqueHolderSeen adds a unique key's note to its confirmation, if still
// open: an answer for a dialog since closed or replaced is dropped.
func (m *Model) uniqueHolderSeen(msg uniqueHolderMsg) {
	if msg.note == "" || m.dlg.confirm != msg.dlg {
		return
	}
	msg.dlg.notes = append(msg.dlg.notes, dialogNote{text: msg.note, style: m.theme.WarnText})
}

// confirmForcedRetry asks before retrying a superseded job (retried with
// new input or replayed from a step), saying what superseded it: the
// store refuses the retry unless forced, since the job's side effects
// would run again beside its successor's.
func (m *Model) confirmForcedRetry(j *engine.Job) tea.Cmd {
	id, by := j.ID, j.SupersededBy
	m.dlg.confirm = &confirmDialog{
		title: fmt.Sprintf("Retry superseded job %s?", termtext.Line(id)),
		count: 1,
		lines: []string{
			m.theme.WarnText.Render("superseded by " + termtext.Line(by) + " (its retry with new input or replay)"),
			"retrying it anyway runs its side effects again",
		},
		yes: func() tea.Cmd { return m.forceRetryCmd(id) },
	}
	return nil
}

// confirmReleaseOne asks before releasing one quarantined job, saying
// what comes next: the job goes on probation, its fingerprint and the
// fingerprint's other held jobs stay as they are.
func (m *Model) confirmReleaseOne(id, title string) tea.Cmd {
	t := m.theme
	next := "The fingerprint's other held jobs stay held until it is released on :quarantine."
	if k := m.km.B(keymap.Release).Help().Key; k != "" && m.km.Enabled(keymap.Release) {
		next = "The fingerprint's other held jobs stay held until " + k + " on :quarantine releases it."
	}
	m.dlg.confirm = &confirmDialog{
		title: title,
		count: 1,
		notes: []dialogNote{
			{"Its fingerprint stays quarantined.", t.WarnText},
			{"On probation: its crash count resets, and its next crash quarantines it again at once.", t.Muted},
			{next, t.Muted},
		},
		yes: func() tea.Cmd {
			apply := m.applyCmd(engine.ActionRelease, []string{id})
			return func() tea.Msg {
				msg := apply()
				if a, ok := msg.(actionMsg); ok {
					a.probation = true
					return a
				}
				return msg
			}
		},
	}
	return nil
}

// actionDone reports an Apply: a toast with the per-id results, marks
// cleared for the jobs that were acted on, and the screen reloaded.
func (m *Model) actionDone(msg actionMsg) tea.Cmd {
	ok := 0
	reasons := map[string]int{}
	var firstFail string
	m.cache.rowGen++ // rows show their notes
	for _, r := range msg.results {
		if r.OK || r.Reason == "not_found" {
			delete(m.jobs.marked, r.ID)
			delete(m.jobs.failNote, r.ID)
		}
		if r.OK {
			ok++
			continue
		}
		if _, still := m.jobs.marked[r.ID]; still {
			// It stays marked, saying why: a second r redoes only these.
			m.jobs.failNote[r.ID] = "✗ " + termtext.Line(r.Reason) + ": " + termtext.Line(r.Error)
		}
		reasons[r.Reason]++
		if firstFail == "" {
			firstFail = termtext.Line(r.ID) + ": " + termtext.Line(r.Error)
		}
	}
	m.jobs.markOrder = m.markedKeysInOrder()
	text := fmt.Sprintf("%d %s", ok, pastTense[msg.action])
	failed := len(msg.results) - ok
	var cmd tea.Cmd
	switch {
	case msg.err != nil:
		text = fmt.Sprintf("%s: %s", text, termtext.Line(msg.err.Error()))
		cmd = m.toastErr(text)
	case failed > 0:
		var parts []string
		for _, r := range sortedKeys(reasons) {
			parts = append(parts, fmt.Sprintf("%s %d", r, reasons[r]))
		}
		text = fmt.Sprintf("%s · %d failed (%s) — %s", text, failed, strings.Join(parts, ", "), firstFail)
		cmd = m.toastErr(text)
	default:
		if msg.probation && ok == 1 {
			text += " · on probation; fingerprint still quarantined"
		}
		cmd = m.toast(text)
	}
	cmds := []tea.Cmd{cmd, m.loadCounts(), m.jobs.refresh(m)}
	if m.sheet.open && m.sheet.id != "" {
		cmds = append(cmds, m.loadDetail(m.sheet.id, false))
	}
	return tea.Batch(cmds...)
}

// markedKeysInOrder keeps the marking order of the ids still marked.
func (m *Model) markedKeysInOrder() []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range m.jobs.markOrder {
		if _, ok := m.jobs.marked[id]; ok && !seen[id] {
			out = append(out, id)
			seen[id] = true
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Clip(keys)
}
