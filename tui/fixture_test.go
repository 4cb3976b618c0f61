package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// The fixture: a real SQLite store and engine holding deterministic jobs
// (fixed ids, payloads and errors), written through the Store contract the
// way workers write them: enqueue, claim, fail or crash.

const (
	// Golden files are drawn at this size.
	goldenW, goldenH = 120, 36
	testWorker       = "worker-1"
)

// Error texts of the fixture.
const (
	errRefused  = "dial tcp 10.0.0.7:5432: connect: connection refused"
	errCurrency = `invalid currency "EURO"`
	errTemplate = "template not found: receipt-v1"
	errOOM      = "runtime: out of memory"
	// errEvil tries to write the clipboard (OSC 52) and clear the screen.
	errEvil = "render failed: \x1b]52;c;aGk=\x07 then \x1b[2J and \u202eevil"
)

type fixture struct {
	store *sqlite.Store
	eng   *engine.Engine
	fp    string // the poison fingerprint
}

type seedJob struct {
	id, queue, kind string
	payload         string
	fails           []string // one error per attempt; the last archives
}

// seedArchived is the dead jobs, oldest death first: the list shows them
// newest first.
var seedArchived = []seedJob{
	{"inv-0001", "billing", "invoice.generate", `{"invoice":1,"currency":"EUR","amount":120}`, []string{errRefused, errRefused, errRefused}},
	{"inv-0002", "billing", "invoice.generate", `{"invoice":2,"currency":"EUR","amount":80}`, []string{errRefused, errRefused, errRefused}},
	{"inv-0003", "billing", "invoice.generate", `{"invoice":3,"currency":"EUR","amount":42}`, []string{errRefused, errRefused, errRefused}},
	{"inv-0004", "billing", "invoice.generate", `{"invoice":4,"currency":"EURO","amount":9}`, []string{errCurrency, errCurrency, errCurrency}},
	{"inv-0005", "billing", "invoice.generate", `{"invoice":5,"currency":"EURO","amount":15}`, []string{errCurrency, errCurrency, errCurrency}},
	{"rcp-0001", "email", "receipt.send", `{"to":"maya@example.com","template":"receipt-v1"}`, []string{errTemplate}},
	{"evil-0001", "email", "receipt.send", `{"to":"x@example.com","note":"\u001b]52;c;aGk=\u0007"}`, []string{errEvil}},
}

// setup builds the store, the engine and the jobs. With start, the engine
// runs maintenance (bulk operations need it).
func setup(t *testing.T, start bool) *fixture {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	eng, err := engine.New(store, engine.Config{
		MaintenanceInterval: 20 * time.Millisecond,
		MaxAttempts:         3,
		WorkerID:            "console-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: store, eng: eng}
	f.seed(t, ctx)
	if start {
		if err := eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = eng.Stop(sctx)
		})
	}
	return f
}

func (f *fixture) seed(t *testing.T, ctx context.Context) {
	t.Helper()
	enqueue := func(ps ...engine.EnqueueParams) {
		t.Helper()
		res, err := f.eng.EnqueueMany(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("enqueue: %v", r.Err)
			}
		}
	}
	// Each dead job is enqueued and failed on its own, attempt by
	// attempt, so claims are deterministic and deaths ordered as listed.
	for _, j := range seedArchived {
		enqueue(engine.EnqueueParams{ID: j.id, Queue: j.queue, Kind: j.kind, Payload: json.RawMessage(j.payload),
			MaxAttempts: len(j.fails), Metadata: json.RawMessage(`{"tenant":"acme"}`)})
		for i, msg := range j.fails {
			job := f.claim(t, ctx, j.queue, j.id)
			p := &backendtest.Outcome{
				JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
				Charge: backend.ChargeAttempt, Event: engine.EventFailed, Actor: testWorker, Message: msg,
				Error:        &engine.AttemptError{Message: msg, Worker: testWorker, Trace: "goroutine 7 [running]:\n\tbilling.go:42\n\tworker.go:310"},
				ErrorPattern: engine.NormalizeError(msg),
				To:           engine.StateRetryable,
			}
			if i == len(j.fails)-1 {
				p.To, p.Reason, p.Event = engine.StateArchived, engine.ReasonAttemptsExhausted, engine.EventArchived
			}
			if _, err := f.store.JobFinish(ctx, p.Plan(job)); err != nil {
				t.Fatalf("finish %s: %v", j.id, err)
			}
			if p.To == engine.StateRetryable {
				if _, err := f.store.JobScheduleDue(ctx, &backend.JobScheduleDueParams{From: []engine.State{engine.StateRetryable, engine.StateScheduled}, To: engine.StateAvailable, Limit: 100}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The poison pill: its crash quarantines its fingerprint; its two
	// siblings, enqueued while it ran, are held when a claim would pick
	// them.
	poison := json.RawMessage(`{"report":"q3-revenue","month":"2026-09"}`)
	enqueue(engine.EnqueueParams{ID: "rep-0001", Queue: "reports", Kind: "report.render", Payload: poison})
	job := f.claim(t, ctx, "reports", "rep-0001")
	enqueue(
		engine.EnqueueParams{ID: "rep-0002", Queue: "reports", Kind: "report.render", Payload: poison},
		engine.EnqueueParams{ID: "rep-0003", Queue: "reports", Kind: "report.render", Payload: poison},
	)
	_, err := f.store.JobFinish(ctx, backendtest.Outcome{
		JobRef: backend.JobRef{ID: job.ID, LeaseID: job.Lease.ID, Fence: job.Fence},
		To:     engine.StateQuarantined, Reason: engine.ReasonQuarantined, Charge: backend.ChargeCrash, Quarantine: true,
		Event: engine.EventQuarantined, Actor: testWorker, Message: errOOM,
		Error: &engine.AttemptError{Crash: true, Message: errOOM, Worker: testWorker}, ErrorPattern: engine.NormalizeError(errOOM),
	}.Plan(job))
	if err != nil {
		t.Fatalf("quarantine: %v", err)
	}
	f.fp = job.Fingerprint
	if _, err := f.store.JobClaim(ctx, &backend.JobClaimParams{Queue: "reports", WorkerID: testWorker, LeaseID: "lease-held",
		Limit: 10, Kinds: map[string]int{"report.render": 1}, LeaseDuration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	enqueue(engine.EnqueueParams{ID: "mail-0001", Queue: "email", Kind: "receipt.send",
		Payload: json.RawMessage(`{"to":"a@example.com"}`), Delay: time.Hour})
}

// claim claims the one available job id of a queue.
func (f *fixture) claim(t *testing.T, ctx context.Context, queue, id string) *engine.Job {
	t.Helper()
	kinds := map[string]int{}
	for _, j := range seedArchived {
		kinds[j.kind] = 1
	}
	kinds["report.render"] = 1
	res, err := f.store.JobClaim(ctx, &backend.JobClaimParams{Queue: queue, WorkerID: testWorker, LeaseID: "lease-" + id,
		Limit: 1, Kinds: kinds, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	if len(res.Jobs) != 1 || res.Jobs[0].ID != id {
		var got []string
		for _, j := range res.Jobs {
			got = append(got, j.ID)
		}
		t.Fatalf("claim on %s took %v, want %s", queue, got, id)
	}
	return res.Jobs[0]
}

// events returns the kinds of a job's timeline.
func (f *fixture) events(t *testing.T, id string) []engine.EventKind {
	t.Helper()
	d, err := f.eng.GetJob(context.Background(), id, false)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	var out []engine.EventKind
	for _, e := range d.Timeline {
		out = append(out, e.Kind)
	}
	return out
}

// The harness: the real program under teatest, with every frame the
// model draws kept so tests can wait for what the screen shows.

type harness struct {
	*Model
	mu    sync.Mutex
	frame string
	// record keeps every frame drawn in frames (tests of what any frame
	// may show).
	record bool
	frames []string
}

func (h *harness) Init() tea.Cmd { return h.Model.Init() }

func (h *harness) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := h.Model.Update(msg)
	return h, cmd
}

func (h *harness) View() tea.View {
	v := h.Model.View()
	h.mu.Lock()
	h.frame = v.Content
	if h.record {
		h.frames = append(h.frames, v.Content)
	}
	h.mu.Unlock()
	return v
}

func (h *harness) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.frame
}

type session struct {
	t  *testing.T
	tm *teatest.TestModel
	h  *harness
}

// testOptions are the options every console test uses: a clock five
// minutes after the store's, so ages read "5m" whatever the run's speed.
func testOptions() Options {
	return Options{
		Theme:        "dark",
		Now:          func() time.Time { return time.Now().Add(5 * time.Minute) },
		Source:       "sqlite://test.db",
		RefreshDelay: 50 * time.Millisecond,
		PollInterval: 50 * time.Millisecond,
		Getenv:       func(string) string { return "" },
	}
}

// start runs the console over ctl at the golden size with a fixed colour
// profile.
func start(t *testing.T, ctl engine.Control, opts Options) *session {
	t.Helper()
	h := &harness{Model: New(ctl, opts)}
	tm := teatest.NewTestModel(t, h,
		teatest.WithInitialTermSize(goldenW, goldenH),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.ANSI)))
	s := &session{t: t, tm: tm, h: h}
	t.Cleanup(func() {
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	})
	return s
}

// waitFor waits until the screen shows all of wants, is settled (no load
// in flight) and live (subscribed), so snapshots do not race the loads.
// countsPending reports whether the state tabs (the second line) still
// show "…" for counts on their way: a screen caught then differs from one
// caught a moment later. With the store-down banner up they stay "…".
func countsPending(screen string) bool {
	lines := strings.SplitN(screen, "\n", 3)
	return len(lines) > 1 && strings.Contains(lines[1], "▸") && strings.Contains(lines[1], " …") &&
		!strings.Contains(screen, "⚠")
}

func (s *session) waitFor(wants ...string) string {
	s.t.Helper()
	return s.waitForWithin(10*time.Second, wants...)
}

// waitForWithin is waitFor with a wait of its own, for a screen that
// shows work done by workers (which a loaded machine slows) rather than
// only the console's own loads.
func (s *session) waitForWithin(wait time.Duration, wants ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		screen := ansi.Strip(s.h.last())
		ok := !strings.Contains(screen, "loading…") && (s.h.opts.NoSubscribe || strings.Contains(screen, "● live") || strings.Contains(screen, "○ unreachable")) &&
			!countsPending(screen)
		for _, w := range wants {
			if !strings.Contains(screen, w) {
				ok = false
				break
			}
		}
		if ok {
			return screen
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q; last screen:\n%s", wants, screen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone waits until the screen no longer shows text.
func (s *session) waitGone(text string) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(ansi.Strip(s.h.last()), text) {
		if time.Now().After(deadline) {
			s.t.Fatalf("screen still shows %q:\n%s", text, ansi.Strip(s.h.last()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// keys sends key presses: single characters, or names in angle brackets
// (<enter>, <esc>, <space>, <tab>, <ctrl+a>, <down>).
func (s *session) keys(seq ...string) {
	for _, k := range seq {
		s.tm.Send(keyMsg(k))
		time.Sleep(15 * time.Millisecond)
	}
}

func (s *session) typeText(text string) {
	s.tm.Type(text)
	time.Sleep(20 * time.Millisecond)
}

func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "<enter>":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "<esc>":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "<space>":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "<tab>":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "<shift+tab>":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "<ctrl+a>":
		return tea.KeyPressMsg{Code: 'a', Mod: tea.ModCtrl}
	case "<down>":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "<ctrl+d>":
		return tea.KeyPressMsg{Code: 'd', Mod: tea.ModCtrl}
	case "<up>":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "<pgdown>":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "<pgup>":
		return tea.KeyPressMsg{Code: tea.KeyPgUp}
	case "<home>":
		return tea.KeyPressMsg{Code: tea.KeyHome}
	case "<end>":
		return tea.KeyPressMsg{Code: tea.KeyEnd}
	case "<left>":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "<right>":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "<backspace>":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "<ctrl+r>":
		return tea.KeyPressMsg{Code: 'r', Mod: tea.ModCtrl}
	case "<ctrl+s>":
		return tea.KeyPressMsg{Code: 's', Mod: tea.ModCtrl}
	}
	r := []rune(k)
	if len(r) != 1 {
		panic("unknown key " + k)
	}
	return tea.KeyPressMsg{Code: r[0], Text: k}
}

var (
	reClock = regexp.MustCompile(`\b\d{2}:\d{2}:\d{2}\b`)
	reDate  = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}\b`)
	reUUID  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	reOpID  = regexp.MustCompile(`[0-9a-f]{6,8}…[0-9a-f]{5,8}`)
	reRate  = regexp.MustCompile(`[\d,]+/s · ETA \S+`)
	// The cutoff field's examples, read off the console's clock
	// (cutoffForms): a clock time, with its seconds while typing, and an
	// RFC 3339 time.
	reHintClock = regexp.MustCompile(`(before |applies · )\d{2}:\d{2}`)
	reHintSecs  = regexp.MustCompile(`\[:\d{2}\]`)
	reStamp     = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(Z|[+-]\d{2}:\d{2})`)
)

// normalize takes out of a screen what changes from run to run: wall
// clock times, operation ids, rates.
func normalize(screen string) string {
	screen = reStamp.ReplaceAllString(screen, "YYYY-MM-DDTHH:MM:SSZ")
	screen = reHintClock.ReplaceAllString(screen, "${1}HH:MM")
	screen = reHintSecs.ReplaceAllString(screen, "[:SS]")
	screen = reClock.ReplaceAllString(screen, "HH:MM:SS")
	screen = reDate.ReplaceAllString(screen, "YYYY-MM-DD")
	hexOut := func(id string) string {
		return strings.Map(func(r rune) rune {
			if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') {
				return 'x'
			}
			return r
		}, id)
	}
	screen = reUUID.ReplaceAllStringFunc(screen, hexOut)
	screen = reOpID.ReplaceAllStringFunc(screen, hexOut)
	screen = reRate.ReplaceAllString(screen, "<rate> · ETA <eta>")
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// golden compares the screen (plain text, normalized) with
// testdata/<test name>.golden; go test -update rewrites it.
func (s *session) golden(screen string) {
	s.t.Helper()
	golden.RequireEqual(s.t, normalize(screen))
}

// goldenAs is golden for a test with several screens:
// testdata/<test name>_<step>.golden.
func (s *session) goldenAs(step, screen string) {
	s.t.Helper()
	golden.RequireEqual(namedTB{s.t, s.t.Name() + "_" + step}, normalize(screen))
}

// goldenANSI compares the styled frame, downsampled to the 16-colour ANSI
// profile the program runs with, so state colours are pinned too
// (archived red, quarantined yellow, ...).
func (s *session) goldenANSI(step string) {
	s.t.Helper()
	var b strings.Builder
	w := &colorprofile.Writer{Forward: &b, Profile: colorprofile.ANSI}
	if _, err := w.WriteString(s.h.last()); err != nil {
		s.t.Fatal(err)
	}
	golden.RequireEqual(namedTB{s.t, s.t.Name() + "_" + step}, normalize(b.String()))
}

type namedTB struct {
	*testing.T
	name string
}

func (n namedTB) Name() string { return n.name }

// startEngine starts maintenance (bulk operations progress from here on).
func (f *fixture) startEngine(t *testing.T) {
	t.Helper()
	if err := f.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = f.eng.Stop(sctx)
	})
}

// stillConsole is a console over f's engine that hears no live changes
// (what it shows comes only from the commands a test runs), sized w×h and
// closed when the test ends; edit, when given, changes its options first.
func (f *fixture) stillConsole(t *testing.T, w, h int, edit func(*Options)) *Model {
	t.Helper()
	o := testOptions()
	o.NoSubscribe = true
	if edit != nil {
		edit(&o)
	}
	m := New(f.eng, o)
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

// stillModel is a console with no store behind it and no live updates:
// a test drives it directly with the answers its commands would bring,
// so a list can be re-sorted under the cursor at a chosen moment.
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

// sheetTop is the first line of the sheet (right of the rule) in a screen.
func sheetTop(screen string) string {
	for _, l := range strings.Split(screen, "\n")[3:] {
		if _, after, ok := strings.Cut(l, "│ "); ok {
			return strings.TrimSpace(after)
		}
	}
	return ""
}

// noFilterCounts is a backend that cannot count a filter.
type noFilterCounts struct{ engine.Control }

func (noFilterCounts) CountJobs(context.Context, engine.CountJobsParams) (*engine.JobCounts, error) {
	return nil, fmt.Errorf("count jobs: %w", engine.ErrUnsupported)
}
