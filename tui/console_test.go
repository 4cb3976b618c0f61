package tui

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// Golden screens and flows over a real SQLite store. go test -update
// rewrites testdata/*.golden.

func TestJobsScreen(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	screen := s.waitFor("evil-0001", "inv-0001", "archived 7", "quarantined 3")
	s.golden(screen)
	s.goldenANSI("ansi")
}

func TestEscapedErrorInSheet(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("<enter>")
	screen := s.waitFor(`\x1b]52;c;aGk=\x07`, `\x1b[2J`, "timeline (")
	raw := s.h.last()
	for _, bad := range []string{"\x1b]52", "\x1b[2J", "\a", "\u202e"} {
		if strings.Contains(raw, bad) {
			t.Fatalf("the frame holds the raw sequence %q", bad)
		}
	}
	s.golden(screen)
}

func TestPayloadInSheet(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0004")
	s.keys("j", "j", "j", "p")
	screen := s.waitFor("› inv-0004", `"currency": "EURO"`, "payload")
	s.golden(screen)
}

func TestMarkTwoAndRetry(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	// Cursor on inv-0005 (third row); mark it and inv-0004 below it.
	s.keys("j", "j", "<space>", "<space>")
	s.waitFor("2 marked")
	s.keys("r")
	confirm := s.waitFor("Retry 2 marked jobs?", "inv-0005", "inv-0004")
	s.golden(confirm)
	s.keys("y")
	s.waitFor("2 retried", "archived 5")
	for _, id := range []string{"evil-0001", "rcp-0001", "inv-0005", "inv-0004", "inv-0003", "inv-0002", "inv-0001"} {
		retried := slices.Contains(f.events(t, id), engine.EventRetried)
		want := id == "inv-0005" || id == "inv-0004"
		if retried != want {
			t.Errorf("%s: retried event = %v, want %v", id, retried, want)
		}
	}
}

func TestMarkedHiddenByFilter(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("<space>") // evil-0001, queue email
	s.keys("/")
	s.typeText("queue:billing")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("<space>")
	s.keys("d")
	screen := s.waitFor("Delete 2 marked jobs?", "1 of them is hidden by the filter")
	s.golden(screen)
	s.keys("<esc>")
	s.waitFor("cancelled — nothing changed")
}

func TestFilterError(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("/")
	s.typeText("queue:billing colour:red")
	screen := s.waitFor(`unknown field "colour"`)
	s.golden(screen)
	s.keys("<esc>")
	s.waitFor("/ no filter")
}

// TestBulkRetry: dry run → confirm → progress → done. The engine starts
// only after the operation is created, so its progress screen is still.
func TestBulkRetry(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("/")
	s.typeText("queue:billing kind:invoice.generate")
	s.keys("<enter>")
	s.waitFor("/ queue:billing", "› inv-0005")
	s.keys("b")
	s.goldenAs("preview", s.waitFor("retry 5 jobs (state archived, queue billing, kind invoice.generate)", "sample:", "y start"))
	s.keys("y")
	s.goldenAs("progress", s.waitFor("Bulk retry — pending", "0 / 5 processed", "c cancel operation"))
	f.startEngine(t)
	s.waitFor("Bulk retry — completed", "5 / 5 processed")
	// The dialog stays on the result until it is closed; the toast that
	// says it too waits for it.
	s.keys("<esc>")
	s.waitFor("bulk retry completed: 5 matched, 5 retried, 0 failed")
	s.waitGone("Bulk retry — completed")
	for _, id := range []string{"inv-0001", "inv-0002", "inv-0003", "inv-0004", "inv-0005"} {
		if !slices.Contains(f.events(t, id), engine.EventRetried) {
			t.Errorf("%s was not retried", id)
		}
	}
	for _, id := range []string{"evil-0001", "rcp-0001"} {
		if slices.Contains(f.events(t, id), engine.EventRetried) {
			t.Errorf("%s was retried but is outside the filter", id)
		}
	}
	s.keys(":")
	s.typeText("operations")
	s.keys("<enter>")
	s.goldenAs("operations", s.waitFor("completed", "retry", "100%"))
}

// TestBulkCancel cancels an operation from its progress dialog.
func TestBulkCancel(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("inv-0001")
	s.keys("b")
	s.waitFor("retry 7 jobs (state archived)")
	s.keys("y")
	s.waitFor("Bulk retry — pending")
	s.keys("c")
	s.waitFor("Bulk retry — cancelled")
	s.keys("<esc>")
	s.waitFor("bulk retry cancelled: 7 matched, 0 retried, 0 failed")
	if slices.Contains(f.events(t, "inv-0001"), engine.EventRetried) {
		t.Fatal("a cancelled operation retried a job")
	}
}

func TestQuarantineRelease(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("quarantine")
	s.keys("<enter>")
	screen := s.waitFor("report.render", "out of memory")
	s.golden(screen)
	s.keys("u")
	s.waitFor("Release 1 fingerprint, 3 held jobs?")
	s.keys("y")
	s.waitFor("released 1 fingerprint: 3 jobs back to available")
	fps, err := f.eng.Quarantine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(fps) != 1 || fps[0].Status != engine.FingerprintProbation {
		t.Fatalf("fingerprints after release: %+v", fps)
	}
}

func TestReadOnly(t *testing.T) {
	f := setup(t, false)
	opts := testOptions()
	opts.ReadOnly = true
	s := start(t, f.eng, opts)
	screen := s.waitFor("READ-ONLY", "evil-0001")
	if strings.Contains(screen, "r retry") || strings.Contains(screen, "b bulk") {
		t.Fatalf("read-only screen offers actions:\n%s", screen)
	}
	s.golden(screen)
	s.keys("<space>", "r", "d", "b")
	s.keys("?")
	help := s.waitFor("keys — generated from the key map", "read-only")
	help = help[strings.Index(help, "keys — generated"):]
	for _, action := range []string{"retry", "delete", "cancel", "bulk from filter", "edit payload", "mark", "select all matching"} {
		if strings.Contains(help, " "+action) {
			t.Errorf("read-only help lists %q", action)
		}
	}
	if strings.Contains(help, "Retry") || strings.Contains(help, "Delete") {
		t.Fatal("an action dialog opened in read-only mode")
	}
	if !slices.Contains(f.events(t, "evil-0001"), engine.EventArchived) || slices.Contains(f.events(t, "evil-0001"), engine.EventRetried) {
		t.Fatal("read-only console changed a job")
	}
}

// TestBuiltinEditor is the story's payload fix as a session served over
// SSH does it: inside the console, never in an external program. A text
// that is not a JSON object is refused and stays in the editor; the
// corrected one is saved with the version that was read.
func TestBuiltinEditor(t *testing.T) {
	f := setup(t, false)
	marker := filepath.Join(t.TempDir(), "editor-ran")
	opts := testOptions()
	opts.BuiltinEditor = true
	opts.Editor = "touch " + marker // must never run
	s := start(t, f.eng, opts)
	s.waitFor("inv-0004")
	s.keys("j", "j", "j", "<enter>")
	s.waitFor("job inv-0004")
	s.keys("e")
	s.goldenAs("open", s.waitFor("Edit the payload of inv-0004", "EURO", "ctrl+s save"))

	// Break it: a comma after the opening brace.
	s.keys("<right>", ",", "<ctrl+s>")
	s.waitFor("not valid JSON", "Edit the payload of inv-0004")
	if slices.Contains(f.events(t, "inv-0004"), engine.EventPayloadEdited) {
		t.Fatal("an invalid edit was saved")
	}
	// Mend it, and fix the currency: EURO → EUR.
	s.keys("<backspace>", "<down>", "<down>", "<end>", "<left>", "<left>", "<backspace>", "<ctrl+s>")
	s.waitFor("payload saved (version")
	s.waitGone("Edit the payload of")
	d, err := f.eng.GetJob(t.Context(), "inv-0004", true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d.Job.Payload), `"EUR"`) || strings.Contains(string(d.Job.Payload), "EURO") {
		t.Fatalf("payload after the edit: %s", d.Job.Payload)
	}

	// esc leaves without saving.
	s.keys("e")
	s.waitFor("Edit the payload of inv-0004")
	s.keys("x", "<esc>")
	s.waitFor("edit cancelled — nothing saved")
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the external editor ran: %v", err)
	}
}

// editableJSON shows every rune that could drive a terminal as its \u
// escape, and the text still decodes to the same value.
func TestEditableJSON(t *testing.T) {
	t.Parallel()
	raw := []byte("{\"a\":\"x\u009b2J\u2028\u202e\U0001F680\xff é\",\n\t\"b\": 1}")
	got := editableJSON(raw)
	for _, bad := range []string{"\u009b", "\u2028", "\u202e", "\xff"} {
		if strings.Contains(got, bad) {
			t.Errorf("%q left raw in %q", bad, got)
		}
	}
	if !strings.Contains(got, `\u009b`) || !strings.Contains(got, "🚀") || !strings.Contains(got, "é") {
		t.Errorf("editable text %q", got)
	}
	var a, b any
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got), &b); err != nil {
		t.Fatalf("editable text is not JSON: %v\n%s", err, got)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("decodes to %#v, want %#v", b, a)
	}
}

func TestHelpScreen(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("?")
	s.golden(s.waitFor("keys — generated from the key map"))
}

func TestQueuesScreen(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("queues")
	s.keys("<enter>")
	s.golden(s.waitFor("billing", "reports", "email", "active"))
}

func TestErrorGroupsScreen(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("errors")
	s.keys("<enter>")
	s.golden(s.waitFor("invalid currency", "connection refused", "template not found"))
	// enter lists the group's jobs.
	s.keys("<enter>")
	s.waitFor("errgroup:")
	s.waitGone("evil-0001")
	screen := s.waitFor("inv-0001")
	if strings.Contains(screen, "evil-0001") {
		t.Fatalf("group list shows a job outside the group:\n%s", screen)
	}
}

func TestOperationsScreenEmpty(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys(":")
	s.typeText("operations")
	s.keys("<enter>")
	s.golden(s.waitFor("no bulk operations yet"))
}

// TestEditPayload: e opens the payload in $EDITOR (here a sed script),
// the edit is validated and saved with the version seen, and the sheet
// shows it on the timeline.
func TestEditPayload(t *testing.T) {
	if _, err := exec.LookPath("sed"); err != nil {
		t.Skip("no sed")
	}
	f := setup(t, false)
	opts := testOptions()
	opts.Editor = "sed -i s/EURO/EUR/"
	opts.TempDir = t.TempDir()
	s := start(t, f.eng, opts)
	s.waitFor("inv-0004")
	s.keys("j", "j", "j", "<enter>")
	s.waitFor("job inv-0004")
	s.keys("e")
	s.waitFor("payload saved (version")
	// The sheet shows the saved payload, and its timeline the edit (the
	// sections above it: metadata, errors, timeline).
	s.waitFor(`"currency": "EUR"`)
	s.keys("[", "[", "[")
	s.waitFor("payload_edited")
	d, err := f.eng.GetJob(t.Context(), "inv-0004", true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d.Job.Payload), `"currency":"EUR"`) && !strings.Contains(string(d.Job.Payload), `"currency": "EUR"`) {
		t.Fatalf("payload after the edit: %s", d.Job.Payload)
	}
}

// TestEditInvalidJSON: an edit that is not a JSON object is refused and
// nothing is saved.
func TestEditInvalidJSON(t *testing.T) {
	if _, err := exec.LookPath("sed"); err != nil {
		t.Skip("no sed")
	}
	f := setup(t, false)
	opts := testOptions()
	opts.Editor = "sed -i s/EURO/EUR/;s/}$/,/"
	opts.TempDir = t.TempDir()
	s := start(t, f.eng, opts)
	s.waitFor("inv-0004")
	s.keys("j", "j", "j", "e")
	s.waitFor("not valid JSON", "nothing saved")
	if slices.Contains(f.events(t, "inv-0004"), engine.EventPayloadEdited) {
		t.Fatal("an invalid edit was saved")
	}
}

// TestStoreDownBanner: a Control that fails shows a banner, and the
// console reconnects by itself when it is back.
func TestStoreDownBanner(t *testing.T) {
	f := setup(t, false)
	ctl := &flakyControl{Control: f.eng}
	ctl.down.Store(true)
	s := start(t, ctl, testOptions())
	s.waitFor("⚠", "connection refused — retrying in")
	ctl.down.Store(false)
	s.waitFor("evil-0001", "archived 7")
	s.waitGone("⚠")
}

type flakyControl struct {
	engine.Control
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:8080: connection refused")

func (c *flakyControl) Meta(ctx context.Context) (*engine.Meta, error) {
	if c.down.Load() {
		return nil, errDown
	}
	return c.Control.Meta(ctx)
}

func (c *flakyControl) Counts(ctx context.Context, q string) (*engine.Counts, error) {
	if c.down.Load() {
		return nil, errDown
	}
	return c.Control.Counts(ctx, q)
}

func (c *flakyControl) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	if c.down.Load() {
		return nil, errDown
	}
	return c.Control.ListJobs(ctx, p)
}

// TestViewerRole: a viewer's token shows no payloads and no actions.
func TestViewerRole(t *testing.T) {
	f := setup(t, false)
	s := start(t, &viewerControl{Control: f.eng}, testOptions())
	s.waitFor("READ-ONLY", "viewer", "evil-0001")
	s.keys("<enter>", "p")
	s.waitFor("job evil-0001", "metadata")
	// The sheet's payload section is below the first screen.
	s.keys("<ctrl+d>")
	screen := s.waitFor("hidden for your role")
	if strings.Contains(screen, "p shows the payload") {
		t.Fatal("the payload key is offered to a viewer")
	}
}

type viewerControl struct{ engine.Control }

func (c *viewerControl) Meta(ctx context.Context) (*engine.Meta, error) {
	m, err := c.Control.Meta(ctx)
	if err != nil {
		return nil, err
	}
	m.Role, m.Actor = engine.RoleViewer, "guest"
	return m, nil
}

// A payload the text area cannot hold whole is not opened: saving what it
// kept would cut the payload.
func TestBuiltinEditorRefusesWhatItCannotHold(t *testing.T) {
	m := New(nil, Options{BuiltinEditor: true, NoSubscribe: true})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	long := "[" + strings.Repeat("\n1,", 12_000) + "\n1\n]"
	m.handleMsg(editReadyMsg{mode: editPayload, id: "big", version: 1, orig: []byte(long)})
	if m.edit.editor != nil {
		t.Fatal("the editor opened a payload longer than it can hold")
	}
	if len(m.toasts.list) == 0 || !strings.Contains(m.toasts.list[len(m.toasts.list)-1].text, "too many to edit") {
		t.Fatalf("toasts %+v", m.toasts.list)
	}
	m.handleMsg(editReadyMsg{mode: editPayload, id: "small", version: 1, orig: []byte("{\n  \"a\": 1\n}")})
	if m.edit.editor == nil || m.edit.editor.ta.Value() != "{\n  \"a\": 1\n}" {
		t.Fatal("the editor did not open a small payload whole")
	}
}
