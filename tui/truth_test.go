package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/keymap"
)

// The console tells the truth at every step. These tests drive
// the model directly with the answers its commands would bring, so a
// list can be re-sorted under the cursor at a chosen moment.

func stillModel(t *testing.T, w, h int) *Model {
	t.Helper()
	opts := testOptions()
	opts.NoSubscribe = true
	m := New(nil, opts)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

func plainScreen(m *Model) string { return ansi.Strip(m.Render()) }

func group(queue, kind, pattern string, n int64) engine.ErrorGroup {
	return engine.ErrorGroup{Queue: queue, Kind: kind, Pattern: pattern, Count: n,
		Selector: engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{queue}, Kinds: []string{kind}, ErrorPattern: pattern}}
}

// loadGroups feeds the errors screen an answer, as its load would.
func loadGroups(m *Model, gs ...engine.ErrorGroup) {
	m.loadScreen(scrErrors)
	m.handleMsg(groupsMsg{seq: m.loads.screenSeq, groups: gs})
}

var (
	gRefused  = group("billing", "invoice.generate", "dial tcp <addr>: connection refused", 4180)
	gCurrency = group("billing", "invoice.generate", `invalid currency "<str>"`, 31)
	gTemplate = group("email", "receipt.send", "template not found", 2)
)

// TestListCursorFollowsItem: the groups re-sort live while a bulk preview
// is open for the second one; the cursor stays on that group, the preview
// names it, and y acts on it.
func TestListCursorFollowsItem(t *testing.T) {
	m := stillModel(t, goldenW, goldenH)
	m.screen = scrErrors
	loadGroups(m, gRefused, gCurrency, gTemplate)
	press(m, "j")
	if g := m.groups.data[m.groups.cursor]; g.Pattern != gCurrency.Pattern {
		t.Fatalf("cursor on %q", g.Pattern)
	}
	m.handleKey(keyMsg("b"))
	if m.dlg.bulk == nil {
		t.Fatal("b opened no preview")
	}
	m.handleMsg(bulkPreviewMsg{seq: m.dlg.bulk.seq, res: &engine.BulkResult{Matched: 31}})
	// The currency group grows past the outage's: it is row 1 now.
	big := gCurrency
	big.Count = 5000
	loadGroups(m, big, gRefused, gTemplate)
	if g := m.groups.data[m.groups.cursor]; g.Pattern != gCurrency.Pattern {
		t.Fatalf("after the re-sort the cursor is on %q, want the currency group", g.Pattern)
	}
	screen := plainScreen(m)
	if !strings.Contains(screen, `invalid currency "<str>"`) || !strings.Contains(screen, "retry 31 jobs") {
		t.Fatalf("the preview does not name its group:\n%s", screen)
	}
	golden.RequireEqual(t, normalize(screen))
	if got := m.dlg.bulk.selector.ErrorPattern; got != gCurrency.Pattern {
		t.Fatalf("y would act on %q", got)
	}
	m.handleKey(keyMsg("<esc>"))
	// Other lists keep their item too: queues, quarantine, operations.
	m.screen = scrQueues
	m.loadScreen(scrQueues)
	m.handleMsg(queuesMsg{seq: m.loads.screenSeq, queues: []engine.QueueInfo{{Name: "billing"}, {Name: "email"}, {Name: "reports"}}})
	press(m, "j")
	press(m, "j")
	m.loadScreen(scrQueues)
	m.handleMsg(queuesMsg{seq: m.loads.screenSeq, queues: []engine.QueueInfo{{Name: "audit"}, {Name: "reports"}, {Name: "billing"}, {Name: "email"}}})
	if q := m.queues.data[m.queues.cursor].Name; q != "reports" {
		t.Fatalf("queues cursor on %q, want reports", q)
	}
	m.handleKey(keyMsg("P"))
	if m.dlg.confirm == nil || !strings.Contains(m.dlg.confirm.title, "reports") {
		t.Fatalf("the pause dialog does not name reports: %+v", m.dlg.confirm)
	}
}

// countingFlaky is flakyControl that counts its Meta calls.
type countingFlaky struct {
	flakyControl
	metaCalls atomic.Int64
}

func (c *countingFlaky) Meta(ctx context.Context) (*engine.Meta, error) {
	c.metaCalls.Add(1)
	return c.flakyControl.Meta(ctx)
}

func waitCond(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConnectionTruth: with the API gone the header stops saying live and
// says it is unreachable; once it is back, the first refresh that
// succeeds (ctrl+r) clears the warning, however long the backoff of the
// other loads has grown.
func TestConnectionTruth(t *testing.T) {
	f := setup(t, false)
	ctl := &countingFlaky{flakyControl: flakyControl{Control: f.eng}}
	s := start(t, ctl, testOptions())
	s.waitFor("evil-0001", "archived 7", "● live")
	ctl.down.Store(true)
	// The header's probe (every few seconds) finds it gone; send its
	// ticks rather than wait for them.
	for i := int64(0); i < 6; i++ {
		n := ctl.metaCalls.Load()
		s.tm.Send(ageTickMsg{})
		waitCond(t, "the probe asked", func() bool { return ctl.metaCalls.Load() > n })
	}
	s.keys("<ctrl+r>")
	waitCond(t, "a retry while down", func() bool { return ctl.metaCalls.Load() >= 8 })
	screen := ansi.Strip(s.h.last())
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(strings.SplitN(screen, "\n", 2)[0], "unreachable") {
		if time.Now().After(deadline) {
			t.Fatalf("the header does not say the API is unreachable:\n%s", screen)
		}
		time.Sleep(10 * time.Millisecond)
		screen = ansi.Strip(s.h.last())
	}
	if strings.Contains(strings.SplitN(screen, "\n", 2)[0], "● live") {
		t.Fatalf("the header says live with the API down:\n%s", screen)
	}
	ctl.down.Store(false)
	s.keys("<ctrl+r>")
	s.waitGone("⚠")
	s.waitFor("● live", "archived 7")
	// And :clear on live data leaves no warning either.
	s.keys(":")
	s.typeText("clear")
	s.keys("<enter>")
	s.waitFor("no filter", "● live")
	if strings.Contains(ansi.Strip(s.h.last()), "⚠") {
		t.Fatal("a warning after :clear on live data")
	}
}

// TestBackIsAStack: esc goes back to the screen and the row it came from;
// the error groups say when the filter scopes them; :jobs is the plain
// job list.
func TestBackIsAStack(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	s.waitFor("invalid currency", "connection refused", "template not found")
	s.keys("j", "<enter>")
	s.waitFor("errgroup:", "inv-0005")
	s.waitGone("evil-0001")
	s.keys("<esc>")
	screen := s.waitFor("Error groups", "template not found")
	if !strings.Contains(screen, "› billing      invoice.generate") || !strings.Contains(screen, "2 of 4") {
		t.Fatalf("esc did not return to the group it came from:\n%s", screen)
	}
	s.goldenAs("back", screen)
	s.keys("<esc>")
	s.waitFor("/ no filter", "evil-0001", "▸archived 7")
	// A filter scopes the groups; the screen says so.
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	screen = s.waitFor("invalid currency", "connection refused")
	if !strings.Contains(screen, "Error groups of state archived, queue billing — the jobs tab and filter scope them") {
		t.Fatalf("the scoped error groups do not state their scope:\n%s", screen)
	}
	s.goldenAs("scoped", screen)
	// :jobs from a group's list with the sheet open: the plain list.
	s.keys("j", "<enter>")
	s.waitFor("errgroup:", "inv-0005")
	s.keys("<enter>")
	s.waitFor("timeline (")
	s.keys(":")
	s.typeText("jobs")
	s.keys("<enter>")
	screen = s.waitFor("/ no filter", "evil-0001")
	if strings.Contains(screen, "timeline (") {
		t.Fatalf(":jobs kept the sheet open:\n%s", screen)
	}
}

// TestFilterLineHelpsTheTypist: / reopens with the filter in force and a
// space after it, so a new term is a new term; a parse error is shown
// whole, the term that failed marked under the input.
func TestFilterLineHelpsTheTypist(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("/")
	s.typeText("kind:invoice.generate")
	s.waitFor("/queue:billing kind:invoice.generate")
	s.typeText(" colour:red")
	_, err := engine.ParseQuery("queue:billing kind:invoice.generate colour:red")
	msg := strings.TrimPrefix(err.Error(), engine.ErrInvalid.Error()+": ")
	screen := s.waitFor(`unknown field "colour"`)
	flat := strings.Join(strings.Fields(screen), " ")
	if !strings.Contains(flat, msg) {
		t.Fatalf("the error is not shown whole (%q):\n%s", msg, screen)
	}
	lines := strings.Split(screen, "\n")
	in := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "/queue:billing") })
	if in < 0 || in+1 >= len(lines) {
		t.Fatalf("no input line:\n%s", screen)
	}
	col := strings.Index(lines[in], "colour:red")
	if mark := lines[in+1]; len(mark) <= col || mark[col] != '^' {
		t.Fatalf("the failing term is not marked:\n%s\n%s", lines[in], lines[in+1])
	}
	s.golden(screen)
}

// TestSmallTerminalsKeepWhatMatters: at 80×24 and 60×15 every id in the
// list is whole, the bulk dialog shows its action line, and the help says
// it has more and scrolls to it.
func TestSmallTerminalsKeepWhatMatters(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {60, 15}} {
		w, h := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			m := loadedModel(t, 50, w, h)
			screen := plainScreen(m)
			shown := 0
			for _, r := range m.jobs.rows[:10] {
				if strings.Contains(screen, r.job.ID) {
					shown++
				}
			}
			if shown < min(10, m.listHeight()) {
				t.Fatalf("%d of the first ids shown whole:\n%s", shown, screen)
			}
			golden.RequireEqual(namedTB{t, t.Name() + "_list"}, normalize(screen))

			m.handleKey(keyMsg("b"))
			if m.dlg.bulk == nil {
				t.Fatal("no bulk dialog")
			}
			m.handleMsg(bulkPreviewMsg{seq: m.dlg.bulk.seq, res: &engine.BulkResult{Matched: 50, Sample: syntheticJobs(10, m.now())}})
			screen = plainScreen(m)
			if !strings.Contains(screen, "y start") {
				t.Fatalf("the bulk dialog's action line is off screen:\n%s", screen)
			}
			golden.RequireEqual(namedTB{t, t.Name() + "_bulk"}, normalize(screen))
			m.handleKey(keyMsg("<esc>"))

			m.handleKey(keyMsg("?"))
			screen = plainScreen(m)
			if !strings.Contains(screen, "more below") {
				t.Fatalf("the help drops rows without saying so:\n%s", screen)
			}
			for range 40 {
				m.handleKey(keyMsg("j"))
			}
			screen = plainScreen(m)
			if !strings.Contains(screen, "commands") || strings.Contains(screen, "more below") {
				t.Fatalf("the help does not scroll to its end:\n%s", screen)
			}
			golden.RequireEqual(namedTB{t, t.Name() + "_help_end"}, normalize(screen))
		})
	}
}

// sheetTop is the first line of the sheet (right of the rule) in a screen.
func sheetTop(screen string) string {
	for _, l := range strings.Split(screen, "\n")[3:] {
		if _, after, ok := strings.Cut(l, "│ "); ok {
			return strings.TrimSpace(after)
		}
	}
	return ""
}

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

// TestReadmeKeyList: the README's key list names the keys of the
// operator's night (STORY.md), e and u among them.
func TestReadmeKeyList(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tab", "enter", "p", "space", "r", "b", "e", "u", "esc", "/", "?"} {
		if !strings.Contains(string(b), "`"+k+"`") {
			t.Errorf("README's key list lacks `%s`", k)
		}
	}
}

// TestNarrowHeaderKeepsConnectionBadge: at 60 columns the header still
// says whether the data is live.
func TestNarrowHeaderKeepsConnectionBadge(t *testing.T) {
	m := stillModel(t, 60, 15)
	m.live.failures[retryMeta] = 1
	head := strings.SplitN(plainScreen(m), "\n", 2)[0]
	if !strings.Contains(head, "○ unreachable") {
		t.Fatalf("the header at 60 columns: %q", head)
	}
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

// TestRowNumbers: a job that completed on its
// sixth run reads 6/6 with no last error; one skipped on its first run
// reads 1/3; one that spent its attempts reads them all.
func TestRowNumbers(t *testing.T) {
	t.Parallel()
	at := time.Now()
	fails := []engine.AttemptError{{Attempt: 5, Message: "boom"}}
	for _, c := range []struct {
		name    string
		job     engine.Job
		att     string
		lastErr string
	}{
		{"completed on the sixth run", engine.Job{ID: "a", State: engine.StateCompleted, Attempt: 5, MaxAttempts: 6, AttemptedAt: &at, Errors: fails}, "6/6", ""},
		{"skipped on the first run", engine.Job{ID: "b", State: engine.StateArchived, TerminalReason: engine.ReasonSkipped, MaxAttempts: 3, AttemptedAt: &at}, "1/3", "skipped"},
		{"attempts exhausted", engine.Job{ID: "c", State: engine.StateArchived, TerminalReason: engine.ReasonAttemptsExhausted, Attempt: 3, MaxAttempts: 3, AttemptedAt: &at, Errors: fails}, "3/3", "boom"},
		{"running its second run", engine.Job{ID: "d", State: engine.StateRunning, Attempt: 1, MaxAttempts: 3, AttemptedAt: &at, Errors: fails}, "2/3", "boom"},
		{"past its deadline before it ran", engine.Job{ID: "e", State: engine.StateArchived, TerminalReason: engine.ReasonDeadlineExceeded, MaxAttempts: 3}, "0/3", "deadline passed before the job ran"},
	} {
		r := newRow(&c.job)
		if r.att != c.att || r.errMsg != c.lastErr {
			t.Errorf("%s: attempt %q, last error %q; want %q, %q", c.name, r.att, r.errMsg, c.att, c.lastErr)
		}
	}
}

// TestTabsCountTheFilter: the state tabs count what
// the filter matches — from the counters under states and one queue, from
// engine.Control.CountJobs under any other term — and the tab's number is
// the list's "of N". A backend that cannot count a filter leaves the tabs
// as totals, and they say so.
func TestTabsCountTheFilter(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	if strings.Contains(s.waitFor("archived 7"), "totals") {
		t.Fatal("the unfiltered tabs call themselves totals")
	}
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	if screen := s.waitFor("/ queue:billing", "› inv-0005", "archived 5", "1 of 5"); strings.Contains(screen, "totals") {
		t.Fatalf("one queue's counters are exact, yet the tabs say totals:\n%s", screen)
	}
	s.keys("/")
	s.typeText(` error:"currency"`)
	s.keys("<enter>")
	screen := s.waitFor(`error:"currency"`, "▸archived 2", "1 of 2")
	if strings.Contains(screen, "totals") || !strings.Contains(screen, "quarantined 0") || !strings.Contains(screen, "scheduled 0") {
		t.Fatalf("the tabs do not count the filter:\n%s", screen)
	}
	s.golden(screen)
	// Another state's tab under the same filter: none there, and the
	// list agrees.
	s.keys("<tab>")
	s.waitFor("▸quarantined 0", "no quarantined jobs match the filter")
}

// noFilterCounts is a backend that cannot count a filter.
type noFilterCounts struct{ engine.Control }

func (noFilterCounts) CountJobs(context.Context, engine.CountJobsParams) (*engine.JobCounts, error) {
	return nil, fmt.Errorf("count jobs: %w", engine.ErrUnsupported)
}

func TestTabsSayWhenTheyAreTotals(t *testing.T) {
	f := setup(t, false)
	s := start(t, noFilterCounts{f.eng}, testOptions())
	s.waitFor("evil-0001")
	s.keys("/")
	s.typeText(`error:"currency"`)
	s.keys("<enter>")
	s.waitFor(`error:"currency"`, "▸arch 7", "quar 3", "  totals")
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

// TestBulkRateInDialog: the preview takes a rate
// limit typed as digits, the operation runs at it (its record says so),
// the progress shows the limit with the measured rate and ETA, and the
// dialog stays on the result until the operator closes it.
func TestBulkRateInDialog(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("b")
	s.waitFor("retry 5 jobs", "no limit")
	s.keys("2", "0", "<backspace>")
	s.goldenAs("preview", s.waitFor("rate [", "2▏] jobs/s · takes about 3s"))
	s.keys("y")
	s.waitFor("Bulk retry — pending", "limit 2/s")
	f.startEngine(t)
	s.waitFor("Bulk retry — completed", "5 / 5 processed", "esc close")
	ops, err := f.eng.Operations(t.Context(), 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops.Operations) != 1 || ops.Operations[0].Rate != 2 {
		t.Fatalf("operations %+v, want one at 2 jobs/s", ops.Operations)
	}
	s.keys("<esc>")
	s.waitGone("Bulk retry — completed")
	// The toast with the result waited for the dialog.
	s.waitFor("bulk retry completed: 5 matched, 5 retried, 0 failed")
}

// TestTabsMarkCappedCounts: a state whose filter count reached its bound
// reads as at least that many, and the list does not claim a total.
func TestTabsMarkCappedCounts(t *testing.T) {
	t.Parallel()
	m := stillModel(t, goldenW, goldenH)
	f, err := engine.ParseQuery(`error:"refused"`)
	if err != nil {
		t.Fatal(err)
	}
	m.jobs.setFilter(`error:"refused"`, f)
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: 50_000}}
	m.tally.fcounts = &engine.JobCounts{States: map[engine.State]int64{engine.StateArchived: 10_000, engine.StateCancelled: 3},
		Capped: []engine.State{engine.StateArchived}, Max: 10_000}
	m.tally.fcountsFor = f.String()
	tabs := strings.Split(plainScreen(m), "\n")[1]
	if !strings.Contains(tabs, "▸arch 10,000+") || !strings.Contains(tabs, "canc 3") || strings.Contains(tabs, "totals") {
		t.Fatalf("tabs %q, want arch 10,000+ and canc 3", tabs)
	}
	if n, ok := m.matchCount(); ok {
		t.Fatalf("matchCount = %d, true past the bound", n)
	}
}

// storeAwayControl is a Control whose API answers while its store is away:
// Meta works, and every read of the store fails.
type storeAwayControl struct {
	engine.Control
	down       atomic.Bool
	countCalls atomic.Int64
}

func (c *storeAwayControl) Counts(ctx context.Context, q string) (*engine.Counts, error) {
	c.countCalls.Add(1)
	if c.down.Load() {
		return nil, errDown
	}
	return c.Control.Counts(ctx, q)
}

func (c *storeAwayControl) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	if c.down.Load() {
		return nil, errDown
	}
	return c.Control.ListJobs(ctx, p)
}

// TestStoreAwayWhileQuiet: the store goes away while nothing changes on
// screen and the meta still answers (embedded, the meta never reaches the
// store; over HTTP the server stays up). The header's probe finds it: the
// header says unreachable, not live, and the status line says why; when
// the store is back the next probe clears both by itself, without a key.
func TestStoreAwayWhileQuiet(t *testing.T) {
	f := setup(t, false)
	ctl := &storeAwayControl{Control: f.eng}
	s := start(t, ctl, testOptions())
	s.waitFor("evil-0001", "archived 7", "● live")
	ctl.down.Store(true)
	header := func() string { return strings.SplitN(ansi.Strip(s.h.last()), "\n", 2)[0] }
	n := ctl.countCalls.Load()
	s.tm.Send(ageTickMsg{})
	waitCond(t, "the probe read the counters", func() bool { return ctl.countCalls.Load() > n })
	waitCond(t, "the header says unreachable", func() bool { return strings.Contains(header(), "unreachable") })
	if h := header(); strings.Contains(h, "● live") {
		t.Fatalf("the header says live with the store away: %s", h)
	}
	s.waitFor("counts failed", "connection refused — retrying in")
	// A meta answer says nothing of the store: the warning stays.
	s.tm.Send(ageTickMsg{})
	time.Sleep(200 * time.Millisecond)
	if h := header(); !strings.Contains(h, "unreachable") {
		t.Fatalf("a tick with the store still away cleared the warning: %s", h)
	}
	ctl.down.Store(false)
	s.tm.Send(ageTickMsg{})
	s.waitGone("⚠")
	s.waitFor("● live", "archived 7")
}

// TestBulkPreviewNeverHidesItsCount: on every size the console runs at,
// down to its smallest (60×12), the bulk preview that offers y shows the
// count it would act on and the rate field. At 60×12 a long error
// group's name used to fill the dialog and the line "retry 4,186 jobs"
// was among the hidden ones, with "y start" still offered (found walking
// the console).
func TestBulkPreviewNeverHidesItsCount(t *testing.T) {
	for _, size := range [][2]int{{60, 12}, {60, 15}, {70, 14}, {80, 24}} {
		w, h := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			m := loadedModel(t, 50, w, h)
			pattern := "dial tcp <addr>: connect: connection refused while sending invoice <n> to the billing gateway"
			sel := engine.Filter{States: []engine.State{engine.StateArchived}, Queues: []string{"billing"},
				Kinds: []string{"invoice.generate"}, ErrorPattern: pattern}
			m.startBulk(engine.ActionRetry, sel, "error group billing / invoice.generate — "+pattern)
			if m.dlg.bulk == nil {
				t.Fatal("no bulk dialog")
			}
			m.handleMsg(bulkPreviewMsg{seq: m.dlg.bulk.seq, res: &engine.BulkResult{Matched: 4186, Sample: syntheticJobs(10, m.now())}})
			screen := plainScreen(m)
			for _, want := range []string{"Bulk retry — dry run", "retry 4,186 jobs", "rate [", "y start"} {
				if !strings.Contains(screen, want) {
					t.Fatalf("the preview does not show %q:\n%s", want, screen)
				}
			}
		})
	}
}

// TestTabsKeepNonEmptyStatesInSight: where the state tabs do not fit,
// empty states go first (the rightmost first) and the line says how many,
// so a state with jobs (quarantined 1, yellow) is never cut off the edge.
// At 60 columns "quar 1" used to run past it (found walking the console).
func TestTabsKeepNonEmptyStatesInSight(t *testing.T) {
	m := loadedModel(t, 50, 60, 12)
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{
		engine.StateCompleted: 446, engine.StateArchived: 4228, engine.StateQuarantined: 1,
	}}
	for _, w := range []int{60, 70, 80} {
		line := ansi.Strip(m.renderTabs(w))
		if wOf(line) > w {
			t.Fatalf("at %d columns the tabs take %d: %q", w, wOf(line), line)
		}
		for _, want := range []string{"done 446", "arch 4,228", "quar 1"} {
			if !strings.Contains(line, want) {
				t.Fatalf("at %d columns the tabs %q do not show %q", w, line, want)
			}
		}
	}
	// Six states with jobs at 60 columns: all of them, and the note goes.
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateRunning: 1, engine.StateRetryable: 1,
		engine.StateCompleted: 381, engine.StateArchived: 4224, engine.StateQuarantined: 1, engine.StateUndecodable: 2}}
	if line := ansi.Strip(m.renderTabs(60)); wOf(line) > 60 || !strings.Contains(line, "undec 2") || strings.Contains(line, "…") {
		t.Fatalf("six states with jobs at 60 columns: %q", line)
	}
	if line := ansi.Strip(m.renderTabs(200)); strings.Contains(line, "empty") || !strings.Contains(line, "scheduled 0") {
		t.Fatalf("wide tabs: %q", line)
	}
}

// TestErrorGroupsNarrowKeepTheError: on a narrow terminal the error
// groups screen still tells its groups apart by their error: at 60
// columns the ERROR column was cut to "…" and the outage's group and the
// bad data's read the same (found walking the console).
func TestErrorGroupsNarrowKeepTheError(t *testing.T) {
	for _, w := range []int{60, 70, 80, 120} {
		m := stillModel(t, w, 14)
		m.screen = scrErrors
		loadGroups(m, gRefused, gCurrency, gTemplate)
		screen := plainScreen(m)
		for _, want := range []string{"dial tcp <addr>", "invalid currency", "template not fo", "4,180"} {
			if !strings.Contains(screen, want) {
				t.Fatalf("at %d columns the groups do not show %q:\n%s", w, want, screen)
			}
		}
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

// TestKeysWaitForTheEditor: keys typed while the editor's text is on its
// way reach neither the list nor a dialog: "e r" typed quickly opened
// "Retry job …?" under the editor, armed for the next y (found over SSH).
// esc gives the editor up, and the editor that comes after is dropped.
func TestKeysWaitForTheEditor(t *testing.T) {
	f := setup(t, false)
	page, err := f.eng.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil || len(page.Jobs) == 0 {
		t.Fatalf("fixture: %v %v", page, err)
	}
	opts := testOptions()
	opts.NoSubscribe, opts.BuiltinEditor = true, true
	m := New(f.eng, opts)
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	m.loads.seq++
	m.jobs.listSeq = m.loads.seq
	m.Update(listMsg{seq: m.loads.seq, mode: listReplace, jobs: page.Jobs})
	cmd := m.handleKey(keyMsg("e"))
	if cmd == nil || !m.edit.opening {
		t.Fatal("e did not start opening the editor")
	}
	m.handleKey(keyMsg("r"))
	if m.dlg.confirm != nil {
		t.Fatalf("r behind the opening editor asked %q", m.dlg.confirm.title)
	}
	if !strings.Contains(plainScreen(m), "opening the editor") {
		t.Fatalf("the wait is not shown:\n%s", plainScreen(m))
	}
	m.handleMsg(cmd())
	if m.edit.editor == nil || m.edit.opening {
		t.Fatalf("the editor did not open (opening %v)", m.edit.opening)
	}
	m.edit.editor = nil
	// Given up with esc: the editor that comes later is dropped.
	cmd = m.handleKey(keyMsg("e"))
	m.handleKey(keyMsg("<esc>"))
	if m.edit.opening {
		t.Fatal("esc did not give the editor up")
	}
	m.handleMsg(cmd())
	if m.edit.editor != nil {
		t.Fatal("an editor given up opened anyway")
	}
}

// TestKeysFollowTheRole: the console offers what the session's role may
// do, no more. An inspector sees payloads and changes nothing; an
// operator may not delete jobs or pause queues (admin's). Both were shown
// those keys, and every one ended in a 403 (found attached and over SSH).
func TestKeysFollowTheRole(t *testing.T) {
	for _, c := range []struct {
		role            engine.Role
		on, off         []keymap.Action
		readOnly, hides bool
	}{
		{engine.RoleViewer, nil, []keymap.Action{keymap.Retry, keymap.Payload, keymap.Edit, keymap.Delete, keymap.Bulk}, true, true},
		{engine.RoleInspector, []keymap.Action{keymap.Payload}, []keymap.Action{keymap.Retry, keymap.Edit, keymap.Release, keymap.Bulk, keymap.Delete, keymap.Pause}, true, false},
		{engine.RoleOperator, []keymap.Action{keymap.Retry, keymap.Edit, keymap.Bulk, keymap.Release}, []keymap.Action{keymap.Delete, keymap.Pause}, false, false},
		{engine.RoleAdmin, []keymap.Action{keymap.Retry, keymap.Delete, keymap.Pause}, nil, false, false},
	} {
		m := loadedModel(t, 5, 120, 30)
		m.handleMsg(metaMsg{meta: &engine.Meta{Role: c.role}})
		if m.sess.readOnly != c.readOnly || m.sess.hidePayload != c.hides {
			t.Errorf("%s: read-only %v, payloads hidden %v", c.role, m.sess.readOnly, m.sess.hidePayload)
		}
		for _, a := range c.on {
			if !m.km.Enabled(a) {
				t.Errorf("%s: %s is off", c.role, a)
			}
		}
		for _, a := range c.off {
			if m.km.Enabled(a) {
				t.Errorf("%s: %s is offered", c.role, a)
			}
		}
	}
	// b on the completed tab would be a bulk delete: refused for an
	// operator with the reason, no dry run sent.
	m := loadedModel(t, 5, 120, 30)
	m.handleMsg(metaMsg{meta: &engine.Meta{Role: engine.RoleOperator}})
	if cmd := m.startBulk(engine.ActionDelete, engine.Filter{States: []engine.State{engine.StateCompleted}}, "the current filter"); m.dlg.bulk != nil || cmd == nil {
		t.Fatalf("an operator's bulk delete opened a dialog")
	}
	if !strings.Contains(plainScreen(m), "needs the admin role") {
		t.Fatalf("no reason shown:\n%s", plainScreen(m))
	}
}

// TestRefusedTokenIsNotAnOutage: a load the server refuses for the
// session's token says refused and is not retried; before, a wrong token
// read "○ unreachable" with "retrying in 16s", doubling for ever.
func TestRefusedTokenIsNotAnOutage(t *testing.T) {
	m := loadedModel(t, 5, 120, 30)
	err := fmt.Errorf("GET /meta: %w", errors.Join(errors.New("unknown bearer token"), engine.ErrDenied))
	if cmd := m.failed(retryMeta, "meta", err); cmd != nil {
		t.Fatal("a refused load was scheduled again")
	}
	screen := plainScreen(m)
	if !strings.Contains(screen, "✕ refused") || strings.Contains(screen, "unreachable") || strings.Contains(screen, "retrying") ||
		!strings.Contains(screen, "meta refused: GET /meta: unknown bearer token") {
		t.Fatalf("a refused token:\n%s", screen)
	}
}

// TestBulkProgressStaleWhileUnreachable: when the operation's progress
// cannot be read, the dialog says so instead of a rate and an ETA; with
// the API down it went on showing "1.8/s · ETA 14s" for as long as it was
// away, while another server had moved the operation on (found attached).
func TestBulkProgressStaleWhileUnreachable(t *testing.T) {
	m := loadedModel(t, 5, 120, 30)
	started := m.now().Add(-10 * time.Second)
	op := &engine.Operation{ID: "op-1", Action: engine.ActionRetry, Status: engine.OperationRunning, Matched: 30, Processed: 5, StartedAt: &started}
	m.watchOperation(op)
	seq := m.dlg.bulk.seq
	m.handleMsg(opPollMsg{seq: seq, op: op, at: m.now().Add(-3 * time.Second)})
	more := *op
	more.Processed = 10
	m.handleMsg(opPollMsg{seq: seq, op: &more, at: m.now()})
	if s := plainScreen(m); !strings.Contains(s, "ETA") {
		t.Fatalf("no rate while polls work:\n%s", s)
	}
	m.handleMsg(opPollMsg{seq: seq, err: errors.Join(errors.New("dial tcp: connection refused"))})
	s := plainScreen(m)
	if strings.Contains(s, "ETA") || !strings.Contains(s, "progress unknown") || !strings.Contains(s, "running when last heard") {
		t.Fatalf("a failing poll still shows a live rate:\n%s", s)
	}
	m.handleMsg(opPollMsg{seq: seq, op: &more, at: m.now().Add(time.Second)})
	if s := plainScreen(m); strings.Contains(s, "progress unknown") {
		t.Fatalf("the dialog stays stale after a poll worked:\n%s", s)
	}
}
