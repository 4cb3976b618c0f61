package tui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// TestNoKeyReachesAHiddenDialog: keys went to an open dialog before the
// console checked that the terminal was too small to draw it, so the
// bulk preview, hidden behind the too-small notice, took y and started a
// retry nobody saw (then swallowed every key but esc while it ran). Now
// no key reaches a dialog the frame does not show, and the notice says
// what waits behind it.
func TestNoKeyReachesAHiddenDialog(t *testing.T) {
	f := setup(t, false)
	m := f.stillConsole(t, goldenW, goldenH, nil)
	runCmd(m, m.startBulk(engine.ActionRetry, engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"}}, "the current filter"))
	if m.dlg.bulk == nil || m.dlg.bulk.phase != bulkPreview || !strings.Contains(ansi.Strip(m.Render()), "Bulk retry") {
		t.Fatalf("no preview on screen:\n%s", ansi.Strip(m.Render()))
	}
	m.Update(tea.WindowSizeMsg{Width: 50, Height: 10})
	screen := ansi.Strip(m.Render())
	if strings.Contains(screen, "Bulk retry") {
		t.Fatalf("the preview is drawn at 50x10:\n%s", screen)
	}
	for _, k := range []string{"y", "5", "<enter>"} {
		m.Update(keyMsg(k))
	}
	if m.dlg.bulk == nil || m.dlg.bulk.phase != bulkPreview || m.dlg.bulk.rateIn != "" {
		t.Fatalf("keys reached the hidden preview: %+v", m.dlg.bulk)
	}
	if !strings.Contains(strings.Join(strings.Fields(screen), " "), "The bulk retry dialog is open; no key reaches it") {
		t.Fatalf("the notice does not say what waits behind it:\n%s", screen)
	}
	m.Update(tea.WindowSizeMsg{Width: goldenW, Height: goldenH})
	if !strings.Contains(ansi.Strip(m.Render()), "Bulk retry") {
		t.Fatalf("the preview is gone once the terminal is large again:\n%s", ansi.Strip(m.Render()))
	}
}

// TestEscWhileStartingKeepsTheRun: esc pressed while the run was being
// asked for ("starting…") dropped the dialog; the answer that started the
// operation then found none and was discarded, so the run went on with
// nothing on screen for as long as it lasted. Fed in that order (esc,
// then the answer), the run is now kept: the status line shows its
// progress and b shows the dialog again.
func TestEscWhileStartingKeepsTheRun(t *testing.T) {
	f := setup(t, false)
	m := f.stillConsole(t, goldenW, goldenH, nil)
	runCmd(m, m.startBulk(engine.ActionRetry, engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"}}, "the current filter"))
	_, start := m.Update(keyMsg("y")) // the Bulk call, not yet answered
	if m.dlg.bulk == nil || m.dlg.bulk.phase != bulkStarting {
		t.Fatalf("y did not ask for the run: %+v", m.dlg.bulk)
	}
	m.Update(keyMsg("<esc>"))
	// The answer comes after the esc; its poll is not run here.
	if start == nil {
		t.Fatal("y asked for nothing")
	}
	started, ok := start().(bulkStartedMsg)
	if !ok {
		t.Fatal("y's command is not the bulk call")
	}
	m.Update(started)
	if m.dlg.bulk == nil || m.dlg.bulk.op == nil {
		t.Fatalf("the started run was dropped: %+v", m.dlg.bulk)
	}
	if status := ansi.Strip(m.statusLine(goldenW)); !strings.Contains(status, "bulk retry 0%") {
		t.Fatalf("the status line does not show the run:\n%s", status)
	}
	m.Update(keyMsg("b"))
	if !strings.Contains(ansi.Strip(m.Render()), "Bulk retry — ") || !m.dlg.bulk.visible {
		t.Fatalf("b does not show the running dialog again:\n%s", ansi.Strip(m.Render()))
	}
}
