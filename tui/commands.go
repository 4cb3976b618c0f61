package tui

import (
	"fmt"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/themes"
)

// The : command line.

// commandHelp is the command list of the help screen.
func commandHelp() string {
	return ":STATE (:archived, any state's tab) :jobs :errors :quarantine :operations :queues :queue NAME :kind NAME :filter QUERY " +
		":replay N :signal NAME [JSON] :limits :limit kind|queue NAME N :audit [QUERY] :resolve NOTE :ignore NOTE :theme " + strings.Join(themes.Names(), "|") + " :clear :help :quit"
}

// commandNames are the completions of the command line.
func commandNames() []string {
	names := []string{"jobs", "errors", "quarantine", "operations", "queues", "schedules", "limits", "audit", "queue ", "kind ", "filter ", "replay ", "signal ", "limit ", "resolve ", "ignore ", "theme ", "clear", "help", "quit"}
	for _, s := range engine.AllStates {
		names = append(names, string(s))
	}
	for _, t := range themes.Names() {
		names = append(names, "theme "+t)
	}
	return names
}

// goScreen goes to another screen, remembering where esc comes back to.
func (m *Model) goScreen(s screen) tea.Cmd {
	if s == m.screen {
		return m.loadScreen(s)
	}
	m.pushNav()
	return m.switchScreen(s)
}

// runCommand runs one command line; an error is shown inline and keeps
// the line open.
func (m *Model) runCommand(line string) (tea.Cmd, error) {
	name, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	arg = strings.TrimSpace(arg)
	name = strings.ToLower(name)
	v := &m.jobs
	if i := slices.Index(engine.AllStates, engine.State(name)); i >= 0 {
		v.tab = i
		v.filter.States = nil
		v.selectAll = false
		return m.switchScreen(scrJobs), nil
	}
	switch name {
	case "":
		return nil, nil
	case "jobs", "j":
		// The plain job list: no filter, no sheet; esc goes back.
		m.pushNav()
		v.setFilter("", engine.Filter{})
		m.sheet.open = false
		return tea.Batch(m.switchScreen(scrJobs), m.loadCounts()), nil
	case "replay":
		return m.replayCommand(arg)
	case "signal":
		return m.signalCommand(arg)
	case "limit":
		return m.limitCommand(arg)
	case "resolve", "ignore":
		return m.verdictCommand(name, arg)
	case "quarantine", "quar":
		return m.goScreen(scrQuarantine), nil
	case "operations", "ops", "op":
		return m.goScreen(scrOperations), nil
	case "queues":
		return m.goScreen(scrQueues), nil
	case "schedules", "sched":
		return m.goScreen(scrSchedules), nil
	case "limits":
		return m.goScreen(scrLimits), nil
	case "audit":
		return m.auditCommand(arg)
	case "errors", "err", "groups":
		return m.goScreen(scrErrors), nil
	case "queue", "kind":
		f := v.filter
		if arg == "" {
			if name == "queue" {
				f.Queues = nil
			} else {
				f.Kinds = nil
			}
		} else if name == "queue" {
			f.Queues = []string{arg}
		} else {
			f.Kinds = []string{arg}
		}
		if err := f.Validate(); err != nil {
			return nil, err
		}
		v.setFilter(f.String(), f)
		return tea.Batch(m.switchScreen(scrJobs), m.loadCounts()), nil
	case "filter", "f":
		f, err := engine.ParseQuery(arg)
		if err != nil {
			return nil, err
		}
		v.setFilter(arg, f)
		return tea.Batch(m.switchScreen(scrJobs), m.loadCounts()), nil
	case "clear":
		v.setFilter("", engine.Filter{})
		v.clearMarks()
		return tea.Batch(m.switchScreen(scrJobs), m.loadCounts()), nil
	case "theme":
		t, ok := themes.ByName(arg)
		if !ok {
			return nil, fmt.Errorf("unknown theme %q; themes: %s", arg, strings.Join(themes.Names(), ", "))
		}
		m.sess.themeExplicit = true
		m.setTheme(t)
		return nil, nil
	case "help":
		m.dlg.help.open = true
		return nil, nil
	case "quit", "q", "exit":
		return m.quit(), nil
	}
	return nil, fmt.Errorf("unknown command %q; try :archived, :queue billing, :errors, :quarantine, :operations, :queues, :schedules, :limits, :audit, :theme light", name)
}
