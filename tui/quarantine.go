package tui

import (
	"fmt"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// quarScreen is the Quarantine screen: fingerprints whose jobs crashed
// their workers, and their release.
type quarScreen struct {
	listScreen
	data []*engine.Fingerprint
}

// SetSize sets the size the fingerprints are drawn at, the header included.
func (s *quarScreen) SetSize(w, h int) { s.listScreen.SetSize(w, h) }

func (s *quarScreen) len() int { return len(s.data) }

func (s *quarScreen) key(i int) string {
	if i < 0 || i >= len(s.data) {
		return ""
	}
	return s.data[i].Fingerprint
}

// Update takes the quarantine's rows and the keys on the cursor's row:
// enter shows its held jobs, release asks before releasing it, copy
// copies it.
func (s *quarScreen) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case quarantineMsg:
		s.data = msg.fps
	case tea.KeyPressMsg:
		km := m.km
		fp := s.data[s.cursor]
		switch {
		case km.Matches(msg, keymap.Open):
			return m.toJobs(func(v *jobsView) {
				v.setFilter("fingerprint:"+fp.Fingerprint, engine.Filter{Fingerprint: fp.Fingerprint, States: []engine.State{engine.StateQuarantined}})
				v.query = "fingerprint:" + fp.Fingerprint
			})
		case km.Matches(msg, keymap.Release):
			if fp.Status != engine.FingerprintQuarantined {
				return m.toastErr("fingerprint is on probation, not quarantined: nothing to release")
			}
			fpv := fp.Fingerprint
			m.dlg.confirm = &confirmDialog{
				title: fmt.Sprintf("Release 1 fingerprint, %s?", plural(int64(fp.Held), "held job", "held jobs")),
				count: int64(fp.Held),
				lines: []string{
					m.theme.Muted.Render("kind " + termtext.Line(fp.Kind) + " · " + fmt.Sprint(fp.Crashes) + " crashes"),
					m.theme.Muted.Render("its held jobs return to available; the next crash quarantines it again"),
				},
				yes: func() tea.Cmd { return m.releaseFingerprint(fpv) },
			}
		case km.Matches(msg, keymap.Copy):
			return tea.Batch(tea.SetClipboard(fp.Fingerprint), m.toast("copied fingerprint"))
		}
	}
	return nil
}

// View draws the fingerprints.
func (s *quarScreen) View(m *Model) []string {
	t, now := m.theme, m.now()
	cols := []colSpec{{"FINGERPRINT", 16, false}, {"KIND", 20, false}, {"STATUS", 11, false}, {"CRASHES", 7, true},
		{"SINCE", 6, true}, {"HELD", 6, true}, {"LAST CRASH", 0, false}}
	return s.render(t, cols, len(s.data), func(i int) []cell {
		fp := s.data[i]
		st := t.WarnText
		if fp.Status != engine.FingerprintQuarantined {
			st = t.Muted
		}
		return []cell{
			{termtext.Line(fp.Fingerprint), t.Cell}, {termtext.Line(fp.Kind), t.Row}, {string(fp.Status), st},
			{fmt.Sprint(fp.Crashes), t.WarnText}, {age(now, fp.Since), t.Cell},
			{commas(int64(fp.Held)), t.Row}, {stepCrashText(fp) + termtext.Line(fp.LastError), t.ErrorText},
		}
	}, s.w, s.h, "no quarantined fingerprints")
}

func (m *Model) released(msg releaseMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr("release: " + termtext.Line(msg.err.Error()))
	}
	return tea.Batch(
		m.toast(fmt.Sprintf("released 1 fingerprint: %s back to available", plural(int64(msg.released), "job", "jobs"))),
		m.loadScreen(scrQuarantine), m.loadCounts())
}

// toJobs goes from a list row to the jobs it is about: set narrows the
// jobs list to them; esc comes back to the row.
func (m *Model) toJobs(set func(v *jobsView)) tea.Cmd {
	m.pushNav()
	m.sheet.open = false
	set(&m.jobs)
	return tea.Batch(m.switchScreen(scrJobs), m.loadCounts())
}
