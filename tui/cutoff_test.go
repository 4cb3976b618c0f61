package tui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// TestBulkCutoffField: the bulk retry's preview offers a cutoff, a field
// of its own reached by tab, its forms and the clock's zone said; what is
// typed there (a clock time, 15m, a date) narrows the retry to the jobs
// that died before it and counts again, a time that is none says why and
// keeps the field, and y is not taken while the field has the keys.
func TestBulkCutoffField(t *testing.T) {
	now := time.Now()
	if now.Add(time.Minute).Day() != now.Day() {
		t.Skip("a clock time a minute ahead would be yesterday's")
	}
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("b")
	s.waitFor("retry 5 jobs", "cutoff [", "tab: before ")
	// Nothing died before 10 minutes ago (the console's clock runs 5m
	// ahead of the store's: 10m is 5m before the deaths).
	s.keys("<tab>")
	s.typeText("10m")
	s.waitFor("cutoff [10m▏", "enter applies")
	s.keys("y") // not the confirm key while the field has the keys
	s.keys("<enter>")
	s.waitFor("retry 0 jobs", "nothing to do  tab change the cutoff · esc close")
	s.keys("<tab>", "<backspace>", "<backspace>", "<backspace>")
	s.typeText("25:00")
	s.keys("<enter>")
	s.waitFor("clock time \"25:00\" is not a time of day")
	for range 5 {
		s.keys("<backspace>")
	}
	// A clock time a minute ahead of the deaths, in the console's zone.
	// The check below reads the same instant: read off the clock again,
	// it is a minute later whenever a minute turns over in between.
	at := time.Now().Add(time.Minute)
	if at.Day() != time.Now().Day() {
		t.Skip("a clock time a minute ahead would be yesterday's")
	}
	clock := at.Format("15:04:05")
	s.typeText(clock)
	s.keys("<enter>")
	screen := s.waitFor("retry 5 jobs", "finalized<", "y start")
	if strings.Contains(screen, "Bulk retry — pending") {
		t.Fatalf("y in the cutoff field started the run:\n%s", screen)
	}
	want := at.Format("15:04")
	if !strings.Contains(screen, "T"+want) && !strings.Contains(screen, want) {
		t.Fatalf("the selector does not carry the cutoff %s:\n%s", clock, screen)
	}
	s.golden(regexp.MustCompile(`finalized<\S+?\)`).ReplaceAllString(screen, "finalized<CUTOFF)"))
}

// TestCutoffHintFromTheClock: the cutoff field's note gives its forms as
// examples read off the console's clock, in the zone it names; it gave
// fixed ones (07:29, 2026-12-05) whatever the time.
func TestCutoffHintFromTheClock(t *testing.T) {
	f := setup(t, false)
	cet := time.FixedZone("CET", 3600)
	m := f.stillConsole(t, goldenW, goldenH, func(o *Options) {
		o.Now = func() time.Time { return time.Date(2027, 3, 14, 18, 42, 9, 0, cet) }
	})
	runCmd(m, m.startBulk(engine.ActionRetry, engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"}}, "the filter"))
	screen := ansi.Strip(m.Render())
	if want := "cutoff [         ] tab: before 18:42 (CET), 15m or 2027-03-14T18:42:09+01:00"; !strings.Contains(screen, want) {
		t.Fatalf("the cutoff note is not %q:\n%s", want, screen)
	}
	m.Update(keyMsg("<tab>"))
	screen = ansi.Strip(m.Render())
	// While the field has the keys the forms are whole, on a second
	// line where they do not fit beside it.
	for _, want := range []string{"cutoff [▏        ] enter applies · 18:42[:09] (CET), 15m or", "2027-03-14T18:42:09+01:00"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("typing in the cutoff field, the note does not say %q:\n%s", want, screen)
		}
	}
}

// TestZeroCutoffTakesNoHiddenRate: with nothing before the cutoff the
// rate field is not drawn, so digits typed without tab (a time typed
// again in the wrong place) go nowhere rather than into a rate the
// next preview would then show and run with.
func TestZeroCutoffTakesNoHiddenRate(t *testing.T) {
	f := setup(t, false)
	m := f.stillConsole(t, goldenW, goldenH, nil)
	runCmd(m, m.startBulk(engine.ActionRetry, engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"}}, "the filter"))
	m.Update(keyMsg("<tab>"))
	for _, k := range "1d" {
		m.Update(keyMsg(string(k)))
	}
	_, cmd := m.Update(keyMsg("<enter>"))
	runCmd(m, cmd)
	screen := ansi.Strip(m.Render())
	if !strings.Contains(screen, "retry 0 jobs") || !strings.Contains(screen, "tab change the cutoff") {
		t.Fatalf("a cutoff a day back leaves nothing and says how to change it:\n%s", screen)
	}
	for _, k := range "0730" {
		m.Update(keyMsg(string(k)))
	}
	if m.dlg.bulk.rateIn != "" {
		t.Fatalf("digits typed with nothing to do set the hidden rate to %q", m.dlg.bulk.rateIn)
	}
	m.Update(keyMsg("<tab>"))
	for range 2 {
		m.Update(keyMsg("<backspace>"))
	}
	_, cmd = m.Update(keyMsg("<enter>"))
	runCmd(m, cmd)
	screen = ansi.Strip(m.Render())
	if !strings.Contains(screen, "retry 5 jobs") || !strings.Contains(screen, "no limit") {
		t.Fatalf("with the cutoff cleared the retry counts the five at no limit:\n%s", screen)
	}
}
