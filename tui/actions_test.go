package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// TestFailedMarksKeepReason: after r on marked jobs, those retried lose
// their marks; the one that failed keeps it, its row says why, and a
// second r names only it.
func TestFailedMarksKeepReason(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("j", "j", "<space>", "<space>")
	s.waitFor("2 marked")
	// Someone else retries inv-0004 meanwhile.
	if _, err := f.eng.Retry(t.Context(), "inv-0004", engine.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	s.keys("r")
	s.waitFor("Retry 2 marked jobs?")
	s.keys("y")
	s.waitFor("1 retried · 1 failed", "1 marked")
	s.keys("/")
	s.typeText("state:available")
	s.keys("<enter>")
	screen := s.waitFor("inv-0004", "●", "✗")
	s.golden(screen)
	s.keys("r")
	// One, not two: the job retried the first time is not in it.
	s.waitFor("Retry 1 marked job?")
}

// TestResumeDialogSaysResume: resuming a paused queue is not described
// with the pause text.
func TestResumeDialogSaysResume(t *testing.T) {
	m := stillModel(t, goldenW, goldenH)
	m.screen = scrQueues
	m.loadScreen(scrQueues)
	m.handleMsg(queuesMsg{seq: m.loads.screenSeq, queues: []engine.QueueInfo{{Name: "billing", Paused: true}}})
	m.handleKey(keyMsg("P"))
	if m.dlg.confirm == nil || !strings.HasPrefix(m.dlg.confirm.title, "Resume queue billing") {
		t.Fatalf("dialog %+v", m.dlg.confirm)
	}
	body := ansi.Strip(strings.Join(m.dlg.confirm.lines, "\n"))
	if strings.Contains(body, "stop claiming") || !strings.Contains(body, "claim from the queue again") {
		t.Fatalf("the resume dialog says %q", body)
	}
}

// TestActionRefusedForTheJobsState: u on an archived job says release
// takes quarantined jobs, without a confirmation that could only fail
// (it asked "Release job …?" and then reported "wrong state"); r on it
// still asks.
func TestActionRefusedForTheJobsState(t *testing.T) {
	m := loadedModel(t, 5, 120, 30)
	m.handleKey(keyMsg("u"))
	if m.dlg.confirm != nil {
		t.Fatalf("u on an archived job asked %q", m.dlg.confirm.title)
	}
	if screen := plainScreen(m); !strings.Contains(screen, "release applies to quarantined jobs") || !strings.Contains(screen, "is archived") {
		t.Fatalf("no reason shown:\n%s", screen)
	}
	m.handleKey(keyMsg("r"))
	if m.dlg.confirm == nil || !strings.Contains(m.dlg.confirm.title, "Retry job") {
		t.Fatalf("r on an archived job: dialog %+v", m.dlg.confirm)
	}
}
