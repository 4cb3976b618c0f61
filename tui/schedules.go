package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// schedulesScreen is the Schedules screen: periodic jobs' schedules, their
// next fire, last fire and its outcome, dead jobs; pausing, resuming and
// running one now (each after a confirmation), and enter for its dead
// jobs.
type schedulesScreen struct {
	listScreen
	data []engine.ScheduleInfo
}

// schedulesMax is the most schedules the screen lists (one page).
const schedulesMax = 200

type schedulesMsg struct {
	seq  uint64
	page *engine.SchedulePage
	err  error
}

type scheduleActionMsg struct {
	name, action string
	err          error
}

// SetSize sets the size the schedules are drawn at, the header included.
func (s *schedulesScreen) SetSize(w, h int) { s.listScreen.SetSize(w, h) }

func (s *schedulesScreen) len() int { return len(s.data) }

func (s *schedulesScreen) key(i int) string {
	if i < 0 || i >= len(s.data) {
		return ""
	}
	return s.data[i].Name
}

// Update takes the schedules read and the keys on the cursor's row.
func (s *schedulesScreen) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case schedulesMsg:
		s.data = nil
		if msg.page != nil {
			s.data = msg.page.Schedules
		}
	case tea.KeyPressMsg:
		sc := s.data[s.cursor]
		name := sc.Name
		switch {
		case m.km.Matches(msg, keymap.Open):
			q := engine.ScheduleJobsQuery(name) + " state:archived"
			f, err := engine.ParseQuery(q)
			if err != nil {
				return m.toastErr(err.Error())
			}
			return m.toJobs(func(v *jobsView) { v.setFilter(q, f) })
		case m.km.Matches(msg, keymap.Pause):
			verb, action, what := "Pause", "pause", "every process passes over its ticks until it is resumed"
			if sc.Paused {
				verb, action, what = "Resume", "resume", "it fires again from its next tick; the ticks passed over stay passed"
			}
			m.dlg.confirm = &confirmDialog{
				title: fmt.Sprintf("%s schedule %s?", verb, termtext.Line(name)),
				lines: []string{m.theme.Muted.Render(what)},
				yes:   func() tea.Cmd { return m.scheduleAction(name, action) },
			}
		case m.km.Matches(msg, keymap.RunNow):
			m.dlg.confirm = &confirmDialog{
				title: fmt.Sprintf("Run schedule %s now?", termtext.Line(name)),
				lines: []string{m.theme.Muted.Render("the next process to look enqueues one job for it, paused or not")},
				yes:   func() tea.Cmd { return m.scheduleAction(name, "trigger") },
			}
		}
	}
	return nil
}

// scheduleStatus is a schedule's state in a word, and its style.
func (m *Model) scheduleStatus(sc engine.ScheduleInfo) cell {
	t := m.theme
	switch {
	case sc.Gone:
		return cell{"gone", t.Subtle}
	case sc.Paused:
		return cell{"paused", t.WarnText}
	case sc.RunNowPending:
		return cell{"run now", t.OKText}
	}
	return cell{"active", t.OKText}
}

// nextFire is a schedule's next fire in its zone's wall clock: the time
// of day within a day, else the date too.
func (m *Model) nextFire(sc engine.ScheduleInfo) string {
	if len(sc.Next) == 0 {
		return "-"
	}
	n := sc.Next[0]
	if loc, err := time.LoadLocation(sc.Zone); err == nil {
		n = n.In(loc)
	}
	if n.Sub(m.now()) < 24*time.Hour {
		return n.Format("15:04")
	}
	return n.Format("Jan 02 15:04")
}

// View draws the schedules.
func (s *schedulesScreen) View(m *Model) []string {
	t, w, h := m.theme, s.w, s.h
	cols := []colSpec{{"SCHEDULE", 18, false}, {"SPEC", 14, false}, {"ZONE", 16, false}, {"STATUS", 8, false},
		{"NEXT", 12, false}, {"LAST", 6, true}, {"OUTCOME", 12, false}, {"DEAD", 6, true}, {"RECENT", 6, false}, {"", 0, false}}
	row := func(i int) []cell {
		sc := s.data[i]
		last, outcome := "-", cell{"-", t.Subtle}
		if sc.FiredAt != nil {
			last = age(m.now(), *sc.FiredAt)
		}
		if sc.LastState != "" {
			outcome = cell{shortState[sc.LastState], t.State(string(sc.LastState))}
		}
		dead := t.Subtle
		if sc.Dead > 0 {
			dead = t.State(string(engine.StateArchived))
		}
		return []cell{{termtext.Line(sc.Name), t.Row}, {termtext.Line(sc.Spec), t.Row}, {termtext.Line(sc.Zone), t.Muted},
			m.scheduleStatus(sc), {m.nextFire(sc), t.Row}, {last, t.Muted}, outcome, {commas(sc.Dead), dead}, {recentRuns(sc.Recent), t.Muted}}
	}
	return s.render(t, cols, len(s.data), row, w, h, "no schedules: a program declares them with engine.Periodic")
}

// recentRuns draws a schedule's last ticks, oldest first, a mark each
// (engine.ScheduleRun.Mark).
func recentRuns(rs []engine.ScheduleRun) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Mark())
	}
	return b.String()
}

// loadSchedules reads the first page of schedules.
func loadSchedules(ctl engine.Control, seq uint64) func(context.Context) tea.Msg {
	return func(c context.Context) tea.Msg {
		page, err := ctl.Schedules(c, schedulesMax, "")
		return schedulesMsg{seq: seq, page: page, err: err}
	}
}

// scheduleAction pauses, resumes or triggers a schedule.
func (m *Model) scheduleAction(name, action string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		var err error
		switch action {
		case "pause":
			err = ctl.PauseSchedule(c, name)
		case "resume":
			err = ctl.ResumeSchedule(c, name)
		default:
			err = ctl.TriggerSchedule(c, name)
		}
		return scheduleActionMsg{name: name, action: action, err: err}
	}
}

// scheduleDone tells how an action went and reloads the screen.
func (m *Model) scheduleDone(msg scheduleActionMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr(fmt.Sprintf("schedule %s: %v", termtext.Line(msg.name), msg.err))
	}
	done := map[string]string{"pause": "paused", "resume": "resumed", "trigger": "will run now"}[msg.action]
	return tea.Batch(m.toast(fmt.Sprintf("schedule %s %s", termtext.Line(msg.name), done)), m.loadScreen(scrSchedules))
}
