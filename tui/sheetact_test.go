package tui

import (
	"context"
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// The one-job keys act on the job the screen shows: the sheet's when a
// sheet is open (a job reached by a link among them), the list's cursor
// row otherwise (Model.oneJob).

// followToDeadLetter opens wf-0001's sheet and follows its link to
// dlq:wf-0001, which the fixture's test cancelled (so r applies to it).
func followToDeadLetter(t *testing.T, ctl engine.Control) *session {
	t.Helper()
	opts := testOptions()
	opts.BuiltinEditor = true
	s := start(t, ctl, opts)
	s.waitFor("wf-0001")
	s.keys("<enter>")
	s.waitFor("job wf-0001", "steps (3)")
	s.keys("l")
	s.waitFor("enter follows dlq:wf-0001")
	s.keys("<enter>")
	return s
}

// cancelledDeadLetter is the workflow fixture with dlq:wf-0001 cancelled:
// retried, it is the one job r may act on.
func cancelledDeadLetter(t *testing.T) *engine.Engine {
	t.Helper()
	eng := workflowFixture(t)
	if _, err := eng.Cancel(context.Background(), "dlq:wf-0001"); err != nil {
		t.Fatal(err)
	}
	return eng
}

// retried reports whether id's timeline has a retry.
func retried(t *testing.T, eng *engine.Engine, id string) bool {
	t.Helper()
	d, err := eng.GetJob(context.Background(), id, false)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return slices.ContainsFunc(d.Timeline, func(ev engine.Event) bool { return ev.Kind == engine.EventRetried })
}

// TestSheetActionsActOnTheSheetsJob: with the list's cursor on wf-0001
// and the sheet showing dlq:wf-0001, reached by its link, every one-job
// key acts on dlq:wf-0001. r retried wf-0001, the list's row.
func TestSheetActionsActOnTheSheetsJob(t *testing.T) {
	eng := cancelledDeadLetter(t)
	s := followToDeadLetter(t, eng)
	s.waitFor("job dlq:wf-0001", "dead job     wf-0001", "state        cancelled")

	s.keys("r")
	dialog := s.waitFor("Retry job")
	s.keys("y")
	s.waitFor("1 retried")
	if retried(t, eng, "wf-0001") {
		t.Fatalf("r retried wf-0001, the list's row, not dlq:wf-0001, the sheet's job:\n%s", dialog)
	}
	if !retried(t, eng, "dlq:wf-0001") {
		t.Fatalf("r did not retry dlq:wf-0001, the sheet's job:\n%s", dialog)
	}
	s.goldenAs("retry", dialog)
	s.waitFor("job dlq:wf-0001", "state        available")

	// The other one-job keys, each naming the sheet's job.
	for _, c := range []struct {
		keys []string
		want string
		done []string
	}{
		{[]string{"c"}, "Cancel job dlq:wf-0001?", []string{"n"}},
		{[]string{"d"}, "Delete job dlq:wf-0001?", []string{"n"}},
		{[]string{"u"}, "release applies to quarantined jobs; dlq:wf-0001 is", nil},
		{[]string{"e"}, "Edit the payload of dlq:wf-0001", []string{"<esc>"}},
		{[]string{"w"}, "Retry dlq:wf-0001 with new input", []string{"<esc>"}},
		{[]string{"y"}, "copied dlq:wf-0001", nil},
		{[]string{":", "signal go", "<enter>"}, "to dlq:wf-0001", nil},
		{[]string{":", "replay 1", "<enter>"}, "Replay dlq:wf-0001 from step 1", []string{"n"}},
	} {
		for _, k := range c.keys {
			if strings.HasPrefix(k, "<") || len([]rune(k)) == 1 {
				s.keys(k)
			} else {
				s.typeText(k)
			}
		}
		s.waitFor(c.want)
		if c.done != nil {
			s.keys(c.done...)
			s.waitGone(c.want)
		}
	}
	if retried(t, eng, "wf-0001") {
		t.Fatal("wf-0001, the list's row, was acted on")
	}
	d, err := eng.GetJob(context.Background(), "dlq:wf-0001", false)
	if err != nil || d.Job.State != engine.StateAvailable {
		t.Fatalf("dlq:wf-0001 %+v (%v), want available still (n and esc changed nothing)", d, err)
	}
}

// slowDetail is a Control whose reads of one job wait for gate: the
// sheet of that job stays loading until the test says.
type slowDetail struct {
	engine.Control
	id   string
	gate chan struct{}
}

func (c *slowDetail) GetJob(ctx context.Context, id string, payload bool) (*engine.JobDetail, error) {
	if id == c.id {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.Control.GetJob(ctx, id, payload)
}

// TestOneJobWhileTheSheetLoads: while the linked job's sheet is still
// loading, a one-job key acts on nothing and says so; once it is shown,
// the key acts on it. r asked to retry wf-0001, the list's row.
func TestOneJobWhileTheSheetLoads(t *testing.T) {
	eng := cancelledDeadLetter(t)
	ctl := &slowDetail{Control: eng, id: "dlq:wf-0001", gate: make(chan struct{})}
	s := followToDeadLetter(t, ctl)
	waitCond(t, "the linked job's sheet loading", func() bool {
		screen := ansi.Strip(s.h.last())
		return strings.Contains(screen, "job dlq:wf-0001") && strings.Contains(screen, "loading…")
	})
	for i, k := range []string{"r", "d", "e", "y"} {
		s.keys(k)
		want := min(i+1, 3) // toasts: the last three
		waitCond(t, k+" saying the job is still loading", func() bool {
			return strings.Count(ansi.Strip(s.h.last()), "still loading the linked job") == want
		})
		screen := ansi.Strip(s.h.last())
		for _, opened := range []string{"Retry job", "Delete job", "Edit the payload", "copied", "wf-0001?"} {
			if strings.Contains(screen, opened) {
				t.Fatalf("%s while the linked job loads showed %q:\n%s", k, opened, screen)
			}
		}
	}
	close(ctl.gate)
	s.waitFor("job dlq:wf-0001", "dead job     wf-0001")
	s.keys("r")
	s.waitFor("Retry job dlq:wf-0001?")
	s.keys("n")
	s.waitGone("Retry job dlq:wf-0001?")
	if retried(t, eng, "wf-0001") || retried(t, eng, "dlq:wf-0001") {
		t.Fatal("a job was retried")
	}
}

// releaseScreen opens the quarantined tab, the cursor on a held job of
// the poison fingerprint, at w×h (0: the golden size), and presses u.
func releaseScreen(t *testing.T, w, h int) (*session, *fixture, string) {
	t.Helper()
	f := setup(t, false)
	opts := testOptions()
	opts.State = engine.StateQuarantined
	s := start(t, f.eng, opts)
	s.waitFor("rep-0001")
	if w > 0 {
		s.tm.Send(tea.WindowSizeMsg{Width: w, Height: h})
		waitCond(t, "the screen at its new size", func() bool {
			lines := strings.Split(ansi.Strip(s.h.last()), "\n")
			return len(lines) == h && wOf(lines[0]) <= w
		})
	}
	s.keys("u")
	screen := s.waitFor("Release job", "y confirm")
	return s, f, screen
}

// releaseText is what the dialog says, whatever its width.
const releaseText = "Its fingerprint stays quarantined. On probation: its crash count resets, and its next crash quarantines it again at once. " +
	"The fingerprint's other held jobs stay held until u on :quarantine releases it."

// dialogText is the dialog's words in one line, its frame taken off.
func dialogText(screen string) string {
	var words []string
	in := false
	for _, l := range strings.Split(screen, "\n") {
		switch {
		case strings.Contains(l, "╭"):
			in = true
			continue
		case strings.Contains(l, "╰"):
			in = false
		}
		if !in {
			continue
		}
		a, b := strings.Index(l, "│"), strings.LastIndex(l, "│")
		if a < 0 || b <= a {
			continue
		}
		words = append(words, strings.Fields(l[a+len("│"):b])...)
	}
	return strings.Join(words, " ")
}

// TestReleaseJobSaysWhatComesNext: releasing one quarantined job says its
// fingerprint stays quarantined, the job goes on probation, and the
// fingerprint's other held jobs wait for u on :quarantine; the toast
// after says the same in short.
func TestReleaseJobSaysWhatComesNext(t *testing.T) {
	s, _, screen := releaseScreen(t, 0, 0)
	if got := dialogText(screen); !strings.Contains(got, releaseText) {
		t.Fatalf("the dialog says %q, want %q in it:\n%s", got, releaseText, screen)
	}
	s.golden(screen)
	s.keys("y")
	s.waitFor("1 released · on probation; fingerprint still quarantined")
}

// TestReleaseJobDialogFitsSmallTerminals: the release dialog is drawn
// whole, its text all there, at the golden size, 80×24 and 60×15.
func TestReleaseJobDialogFitsSmallTerminals(t *testing.T) {
	for _, c := range []struct {
		name string
		w, h int
	}{{"default", 0, 0}, {"80x24", 80, 24}, {"60x15", 60, 15}} {
		t.Run(c.name, func(t *testing.T) {
			s, _, screen := releaseScreen(t, c.w, c.h)
			h := goldenH
			if c.h > 0 {
				h = c.h
			}
			dialogWhole(t, screen, h)
			if strings.Contains(screen, "lines hidden") {
				t.Fatalf("lines of the dialog were hidden:\n%s", screen)
			}
			if got := dialogText(screen); !strings.Contains(got, releaseText) {
				t.Fatalf("the dialog says %q, want %q in it:\n%s", got, releaseText, screen)
			}
			s.golden(screen)
		})
	}
}
