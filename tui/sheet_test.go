package tui

import (
	"slices"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// TestSheetKeysAndSections: with the sheet open the status line offers
// the sheet's keys; ] and [ jump between its sections, down to the
// payload below the traces; p twice puts the sheet back where it was.
func TestSheetKeysAndSections(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0004")
	// A short terminal: the sheet is longer than the screen.
	s.tm.Send(tea.WindowSizeMsg{Width: goldenW, Height: 22})
	s.keys("j", "j", "j", "<enter>")
	screen := s.waitFor("job inv-0004", "timeline (")
	lines := strings.Split(screen, "\n")
	status := lines[len(lines)-1]
	if !strings.Contains(status, "p payload") || !strings.Contains(status, "] next sheet section") {
		t.Fatalf("the status line does not offer the sheet's keys: %q", status)
	}
	s.keys("]")
	screen = s.waitFor("lifecycle")
	if top := sheetTop(screen); top != "lifecycle" {
		t.Fatalf("] went to %q, want lifecycle:\n%s", top, screen)
	}
	s.keys("]", "]")
	screen = s.waitFor("errors (3)")
	if top := sheetTop(screen); top != "errors (3)" {
		t.Fatalf("] ] went to %q, want errors (3):\n%s", top, screen)
	}
	s.keys("[")
	screen = s.waitFor("timeline (")
	if top := sheetTop(screen); !strings.HasPrefix(top, "timeline (") {
		t.Fatalf("[ went to %q, want the timeline:\n%s", top, screen)
	}
	s.keys("[", "[")
	s.waitFor("job inv-0004")
	s.keys("p")
	s.waitFor(`"currency": "EURO"`)
	s.keys("p")
	s.waitGone(`"currency": "EURO"`)
	screen = s.waitFor("job inv-0004")
	if top := sheetTop(screen); top != "job inv-0004" {
		t.Fatalf("p twice left the sheet at %q:\n%s", top, screen)
	}
	s.golden(screen)
}

// TestEditedPayloadShown: after `e` saves, the sheet
// shows the new payload at once, without `p` (and without a second `p`),
// and the payload_edited entry says which path changed.
func TestEditedPayloadShown(t *testing.T) {
	f := setup(t, false)
	opts := testOptions()
	opts.BuiltinEditor = true
	s := start(t, f.eng, opts)
	s.waitFor("inv-0004")
	s.keys("j", "j", "j", "<enter>")
	s.waitFor("job inv-0004")
	s.keys("e")
	s.waitFor("Edit the payload of inv-0004", "EURO")
	// EURO → EUR, as in TestBuiltinEditor.
	s.keys("<down>", "<down>", "<end>", "<left>", "<left>", "<backspace>", "<ctrl+s>")
	s.waitFor("payload saved (version")
	s.waitGone("Edit the payload of")
	// The sheet scrolls to the payload it just saved.
	s.waitFor(`"currency": "EUR"`, "payload")
	d, err := f.eng.GetJob(t.Context(), "inv-0004", false)
	if err != nil {
		t.Fatal(err)
	}
	var edited string
	for _, ev := range d.Timeline {
		if ev.Kind == engine.EventPayloadEdited {
			edited = ev.Message
		}
	}
	if !strings.HasPrefix(edited, `currency: "EURO" → "EUR"; fingerprint `) {
		t.Fatalf("payload_edited says %q, want the changed path first", edited)
	}
}

// TestTimelineClaimsEachRun: the happy path keeps
// no event rows, so only the last run's claim is stored; the sheet's
// timeline shows a claim before each earlier run too, derived from its
// error entry, numbered as the run and marked as derived.
func TestTimelineClaimsEachRun(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0004")
	s.keys("j", "j", "j", "<enter>")
	screen := s.waitFor("job inv-0004", "timeline (7)")
	var kinds []string
	in := false
	for _, l := range strings.Split(screen, "\n") {
		_, after, ok := strings.Cut(l, "│ ")
		if !ok {
			continue
		}
		after = strings.TrimSpace(after)
		switch {
		case strings.HasPrefix(after, "timeline ("):
			in = true
			continue
		case in && after == "":
			in = false
		}
		if f := strings.Fields(after); in && len(f) >= 2 && len(f[0]) == 8 && f[0][2] == ':' {
			k := f[1]
			if strings.HasPrefix(k, "+") && len(f) >= 3 {
				k = f[2]
			}
			if len(f) >= 4 && strings.HasPrefix(f[len(f)-3], "#") {
				k += " " + f[len(f)-3]
			}
			kinds = append(kinds, k)
		}
	}
	want := []string{"enqueued", "claimed #1", "failed #1", "claimed #2", "failed #2", "claimed #3", "archived #3"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("timeline reads %q, want %q:\n%s", kinds, want, screen)
	}
	if n := strings.Count(screen, engine.DerivedClaimNote); n != 2 {
		t.Fatalf("%d claims say they are derived, want the two earlier runs':\n%s", n, screen)
	}
	s.golden(screen)
}
