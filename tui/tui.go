// Package tui is the operations console: one Bubble Tea program that
// finds, explains and redrives jobs. It sees the engine only through
// engine.Control, so it works the same embedded, attached over HTTP and
// served over SSH.
//
// Rules kept throughout: no IO in Update — every Control call is a
// tea.Cmd whose answer carries a sequence number, and stale answers are
// dropped; the model is never touched by a command; every string from a
// job is sanitized before it is drawn; styles come from package themes
// and keys from package keymap; logs go to the Logger the caller gives (a
// file), never to the terminal.
package tui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
	"github.com/sluicehq/sluice/themes"
)

// Options configure a console session.
type Options struct {
	// ReadOnly hides every action that changes jobs or queues. The
	// console is read-only too when Meta says so or the role is viewer.
	ReadOnly bool
	// Theme names a theme (dark, light, high-contrast, mono); "" picks
	// dark or light by the terminal's background. NO_COLOR wins.
	Theme string
	// KeyMap replaces the default bindings (keymap.Load reads the user's).
	KeyMap *keymap.KeyMap
	// Now is the clock ages are measured against (time.Now when nil).
	Now func() time.Time
	// Logger receives diagnostics; it must not write to the terminal.
	Logger *slog.Logger
	// State is the tab the console opens on (archived when empty).
	State engine.State
	// Query is the filter the console opens with, in the q grammar.
	Query string
	// Source describes what the console is attached to, for the header
	// ("sqlite://sluice.db", "https://host").
	Source string
	// Actor names the operator on the timeline, for the header.
	Actor string
	// Editor is the command that edits payloads; $VISUAL, $EDITOR, then vi.
	Editor string
	// BuiltinEditor edits payloads (e and w) inside the console instead of
	// in $EDITOR. Sessions served over SSH set it: an external editor
	// would run on the server, as the server, named by the client's
	// environment, and any editor can start a shell.
	BuiltinEditor bool
	// Getenv reads the session's environment (NO_COLOR, EDITOR); os.Getenv
	// when nil. Sessions served over SSH pass the client's.
	Getenv func(string) string
	// TempDir holds payloads while they are edited (os.TempDir when "").
	TempDir string
	// PageSize is how many rows one ListJobs call asks for (200).
	PageSize int
	// Window is the most job rows kept in memory; scrolling past it drops
	// the far end and reloads it by cursor when scrolled back (2,000).
	Window int
	// NoSubscribe turns live updates off (tests that want still screens).
	NoSubscribe bool
	// RefreshDelay coalesces live changes into one reload (300ms).
	RefreshDelay time.Duration
	// PollInterval is how often a running operation is polled (250ms).
	PollInterval time.Duration
	// IdleRecount is how long the console waits with no key pressed and
	// no load on its way before it counts a capped state tab whole
	// (recount.go; 3s); negative: never.
	IdleRecount time.Duration
	// Mouse turns on the mouse: wheel, row clicks and tab clicks on the
	// jobs screen (mouse.go).
	Mouse bool
	// Context ends the session's calls when cancelled.
	Context context.Context
}

type screen int

const (
	scrJobs screen = iota
	scrQuarantine
	scrOperations
	scrQueues
	scrErrors
)

var screenNames = []string{"jobs", "quarantine", "operations", "queues", "errors"}

// Model is the console's one root model.
type Model struct {
	ctl    engine.Control
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	log    *slog.Logger
	now    func() time.Time
	getenv func(string) string

	baseKM        *keymap.KeyMap
	km            *keymap.KeyMap
	theme         *themes.Theme
	themeExplicit bool

	width, height int
	profile       colorprofile.Profile
	meta          *engine.Meta
	readOnly      bool
	hidePayload   bool
	// notAdmin: the session's role is below admin, which alone may delete
	// jobs and pause queues: those keys go (an operator was shown them,
	// and the server refused each).
	notAdmin bool
	// denied: the server refused this session's token or role on a load
	// (engine.ErrDenied); the header says so and no load is retried.
	denied bool
	counts *engine.Counts
	// fcounts counts, per state, what the filter fcountsFor matches, for
	// a filter the counters cannot answer (see countsServe); fcountsOff
	// says the backend cannot count it, so the tabs are totals.
	fcounts    *engine.JobCounts
	fcountsFor string
	fcountsOff bool
	// exact is a state's count under a filter as a bulk dry run or the
	// idle recount counted it, whole, where the filter's own counts
	// stopped at their bound or at the store's scan budget (the tab read
	// 9,484+ while the dry run said 9,997).
	exact exactCount
	// The idle recount (recount.go): lastInput is when the operator last
	// pressed a key, clicked or pasted; idleArmed, an idleTickMsg is on
	// its way; recountSeq tags the recount on its way (0: none), for
	// recountFor, sent at recountSent, cancelled by recountCancel;
	// recountDone is the count last taken whole (not taken again until
	// it changes); recountNotBefore paces recounts after a slow one.
	lastInput        time.Time
	idleArmed        bool
	recountSeq       uint64
	recountFor       recountKey
	recountSent      time.Time
	recountCancel    context.CancelFunc
	recountDone      recountKey
	recountNotBefore time.Time

	screen screen
	jobs   jobsView
	sheet  sheetView
	quar   listScreen
	ops    listScreen
	queues listScreen
	groups listScreen

	quarData   []*engine.Fingerprint
	opsData    []*engine.Operation
	queuesData []engine.QueueInfo
	groupsData []engine.ErrorGroup
	// groupsNear is, per group, the groups of one job beside it
	// (engine.NearSingletons), computed once as the groups are read;
	// nil when groupsHidden.
	groupsNear [][]int
	// groupsHidden: the server sent the groups without their error text
	// (a viewer's, with errors hidden): nothing is said of near groups,
	// which is read from that text.
	groupsHidden bool
	// groupsScope is the filter groupsData was asked for.
	groupsScope string

	// nav is where esc goes back to (nav.go).
	nav []navFrame

	input  *inputLine
	dialog *confirmDialog
	bulk   *bulkDialog
	help   bool
	// helpScroll is the first help line shown (clamped when drawn).
	helpScroll int
	toasts     []toast
	toastID    int
	toastGen   uint64

	banner   string
	failures map[retryWhat]int
	retrying map[retryWhat]bool

	seq       uint64
	countsSeq uint64
	screenSeq uint64
	// countsBusy and screenBusy: the newest load of the counts (of the
	// screen) has not answered yet. A live refresh then waits for it
	// (countsAgain, screenAgain) instead of sending another, which would
	// make the answer on its way stale: with loads slower than the
	// refresh delay (error groups of a million dead jobs on PostgreSQL
	// take a second) no answer would ever be shown, and the loads would
	// pile up on the store.
	countsBusy, countsAgain bool
	screenBusy, screenAgain bool
	// screenSent is when the newest screen load was sent. A live reload
	// waits until screenNotBefore, as long after a load's answer as the
	// load took (reloadScreen): a screen whose query takes a second keeps
	// the store at most half busy. screenTick: a screenTickMsg is on its
	// way.
	screenSent, screenNotBefore time.Time
	screenTick                  bool

	sub          <-chan engine.Change
	subscribing  bool
	probing      bool // a probeStore is on its way
	refreshArmed bool
	rowGen       uint64
	colsCache    jobCols
	tabsCache    cached[tabsKey]
	titleCache   cached[titleKey]
	helpCache    cached[helpKey]
	headCache    cached[uint64]
	filterCache  cached[filterKey]
	cursorSGR    struct {
		theme     *themes.Theme
		pre, post string
	}
	colsKey     colsKey
	pendingEdit *editReadyMsg
	// editOpening: an editor is on its way (its text is being read); keys
	// wait for it, esc gives it up. editSeq tags the editor asked for,
	// so one given up is dropped when it comes. Without the wait, "e r"
	// typed quickly would open a retry confirmation under the editor,
	// armed for the next y.
	editOpening bool
	editSeq     uint64
	editor      *payloadEditor // the built-in editor, while open
	quitting    bool
}

// New builds the console over ctl.
func New(ctl engine.Control, opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.PageSize <= 0 || opts.PageSize > engine.MaxListLimit {
		opts.PageSize = engine.MaxListLimit
	}
	if opts.Window <= 0 {
		opts.Window = 2_000
	}
	if opts.Window < 3*opts.PageSize {
		opts.Window = 3 * opts.PageSize
	}
	if opts.RefreshDelay <= 0 {
		opts.RefreshDelay = 300 * time.Millisecond
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.IdleRecount == 0 {
		opts.IdleRecount = defaultIdleRecount
	}
	parent := opts.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	km := opts.KeyMap
	if km == nil {
		km = keymap.Default()
	}
	m := &Model{
		ctl: ctl, opts: opts, ctx: ctx, cancel: cancel,
		log: opts.Logger, now: opts.Now, getenv: opts.Getenv,
		baseKM:   km,
		failures: map[retryWhat]int{},
		retrying: map[retryWhat]bool{},
		width:    80, height: 24,
	}
	m.themeExplicit = opts.Theme != ""
	m.theme = themes.Resolve(opts.Theme, true, m.getenv)
	m.readOnly = opts.ReadOnly
	m.applyKeys()
	m.jobs.init(opts)
	m.rowGen = 1
	m.lastInput = m.now() // opening the console is the first input: idle counts from here
	return m
}

// applyKeys derives the live keymap from the base one and the session's
// rights.
func (m *Model) applyKeys() {
	km := m.baseKM
	if m.readOnly {
		// Marks serve only actions: a read-only session has none.
		km = km.ReadOnly().Without(keymap.Mark, keymap.MarkAll, keymap.SelectAll)
	}
	if m.notAdmin {
		km = km.Without(keymap.Delete, keymap.Pause)
	}
	if m.hidePayload {
		// A step's result is job data as the payload is.
		km = km.Without(keymap.Payload, keymap.Edit, keymap.RetryInput, keymap.ReplayResult)
	}
	if !km.Enabled(keymap.ReplayStep) {
		// Without replay (read-only, viewers, unbound) the replacement
		// result of a replay has nothing to do. The step keys stay: they
		// also pick the link enter follows (moveStep), which changes
		// nothing.
		km = km.Without(keymap.ReplayResult)
	}
	m.km = km
}

// Run runs the console on the terminal until the user quits.
func Run(ctl engine.Control, opts Options, progOpts ...tea.ProgramOption) error {
	m := New(ctl, opts)
	defer m.cancel()
	p := tea.NewProgram(m, progOpts...)
	_, err := p.Run()
	return err
}

// Close ends the session's background calls (Run does it on return).
func (m *Model) Close() { m.cancel() }

// Init starts the first loads and live updates.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{
		m.loadMeta(),
		m.loadCounts(),
		m.loadList(listReplace, "", 0),
		tea.RequestBackgroundColor,
		tea.Tick(5*time.Second, func(time.Time) tea.Msg { return ageTickMsg{} }),
	}
	if !m.opts.NoSubscribe {
		cmds = append(cmds, m.subscribe())
	}
	return tea.Batch(cmds...)
}

// Update handles one message. It never does IO: loads and actions are
// returned as commands.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg.(type) {
	case tea.KeyPressMsg, tea.MouseClickMsg, tea.MouseWheelMsg, tea.PasteMsg:
		m.noteInput()
	}
	cmd := m.update(msg)
	if t := m.syncToasts(); t != nil {
		cmd = tea.Batch(cmd, t)
	}
	if t := m.syncRecount(); t != nil {
		cmd = tea.Batch(cmd, t)
	}
	return m, cmd
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if msg.Width != m.width {
			m.rowGen++
			m.sheet.invalidate()
		}
		m.width, m.height = msg.Width, msg.Height
		m.sizeEditor()
		m.jobs.keepCursorVisible(m.listHeight())
		return m.maybeLoadMore()
	case tea.BackgroundColorMsg:
		if !m.themeExplicit && !themes.NoColor(m.getenv) {
			m.setTheme(themes.Resolve("", msg.IsDark(), m.getenv))
		}
		return nil
	case tea.ColorProfileMsg:
		m.profile = msg.Profile
		m.setTheme(m.theme)
		return nil
	case tea.KeyPressMsg:
		return m.handleKey(msg)
	case tea.MouseMsg:
		return m.handleMouse(msg)
	case tea.PasteMsg:
		if m.editor != nil {
			var cmd tea.Cmd
			m.editor.ta, cmd = m.editor.ta.Update(msg)
			return cmd
		}
		if m.input != nil {
			return m.input.update(msg)
		}
		return nil
	}
	return m.handleMsg(msg)
}

// setTheme draws with t from now on, adapted to the terminal's colours.
func (m *Model) setTheme(t *themes.Theme) {
	t = t.ForProfile(m.profile)
	if t == m.theme {
		return
	}
	m.theme = t
	m.rowGen++
	m.sheet.invalidate()
	if m.editor != nil {
		m.editor.ta.SetStyles(t.Editor)
	}
	if m.input != nil {
		m.input.restyle(t)
	}
}

// handleMsg routes the answers of commands and timers.
func (m *Model) handleMsg(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case metaMsg:
		if msg.err != nil {
			return m.failed(retryMeta, "meta", msg.err)
		}
		cmd := m.succeeded(retryMeta)
		m.meta = msg.meta
		// A viewer sees no payloads; an inspector sees them but, as a
		// viewer, may change nothing (the server refuses every action of
		// both: the keys go rather than fail with 403).
		role := msg.meta.Role
		ro := m.opts.ReadOnly || msg.meta.ReadOnly || role == engine.RoleViewer || role == engine.RoleInspector
		hide := role == engine.RoleViewer
		notAdmin := role != "" && role != engine.RoleAdmin
		if ro != m.readOnly || hide != m.hidePayload || notAdmin != m.notAdmin {
			m.readOnly, m.hidePayload, m.notAdmin = ro, hide, notAdmin
			m.applyKeys()
			m.sheet.invalidate()
		}
		return cmd
	case countsMsg:
		if msg.seq != m.countsSeq {
			return nil
		}
		m.countsBusy = false
		again := m.countsAgain
		m.countsAgain = false
		if msg.err != nil {
			return m.failed(retryCounts, "counts", msg.err)
		}
		cmd := m.succeeded(retryCounts)
		m.counts = msg.counts
		m.fcounts, m.fcountsFor, m.fcountsOff = msg.fcounts, msg.fkey, msg.fOff
		m.jobs.placeFromEnd(m)
		if again {
			cmd = tea.Batch(cmd, m.loadCounts())
		}
		return cmd
	case listMsg:
		return m.jobs.take(m, msg)
	case detailMsg:
		return m.sheet.take(m, msg)
	case actionMsg:
		return m.actionDone(msg)
	case signalMsg:
		return m.signalDone(msg)
	case bulkPreviewMsg, bulkAgeTickMsg, bulkStartedMsg, opPollMsg, opTickMsg, opCancelMsg:
		return m.bulkMsg(msg)
	case quarantineMsg, operationsMsg, queuesMsg, groupsMsg:
		return m.screenLoaded(msg)
	case releaseMsg:
		return m.released(msg)
	case pauseMsg:
		if msg.err != nil {
			return m.toastErr(fmt.Sprintf("queue %s: %v", termtext.Line(msg.queue), msg.err))
		}
		verb := "resumed"
		if msg.paused {
			verb = "paused"
		}
		return tea.Batch(m.toast(fmt.Sprintf("queue %s %s", termtext.Line(msg.queue), verb)), m.loadScreen(scrQueues))
	case subscribedMsg:
		m.subscribing = false
		if msg.err != nil {
			return m.failed(retrySubscribe, "live updates", msg.err)
		}
		m.sub = msg.ch
		return tea.Batch(m.succeeded(retrySubscribe), waitChanges(m.ctx, m.sub))
	case changesMsg:
		return m.changes(msg)
	case refreshTickMsg:
		m.refreshArmed = false
		return m.refresh()
	case screenTickMsg:
		m.screenTick = false
		if m.screenAgain && m.screen != scrJobs {
			return m.reloadScreen()
		}
		return nil
	case ageTickMsg:
		m.rowGen++
		m.sheet.invalidate() // its stamps say "… ago" too
		// The tick doubles as the connection probe: a live stream that
		// reconnects by itself says nothing while the API or the store is
		// away, and the header must not say live then. The meta answers
		// for the API; the counters, the cheapest read there is, for the
		// store behind it (embedded, the meta never reaches the store).
		cmds := []tea.Cmd{m.loadMeta(), tea.Tick(5*time.Second, func(time.Time) tea.Msg { return ageTickMsg{} })}
		// The open sheet is read again too: not every change of a job is
		// heard (a claim, a lease renewed, another process's reaper when
		// the counters end where they were), and a sheet must not show a
		// lease long expired as the job's.
		if s := &m.sheet; m.screen == scrJobs && s.open && s.id != "" && s.detail != nil && !s.detailBusy {
			cmds = append(cmds, m.loadDetail(s.id, false))
		}
		if !m.probing {
			m.probing = true
			cmds = append(cmds, m.probeStore())
		}
		return tea.Batch(cmds...)
	case probeMsg:
		m.probing = false
		if msg.err != nil {
			return m.failed(retryCounts, "counts", msg.err)
		}
		if _, failing := m.failures[retryCounts]; failing {
			// Back: what is on screen is as old as the outage.
			return m.refresh()
		}
		return nil
	case toastExpireMsg:
		m.toastExpired(msg)
		return nil
	case retryMsg:
		return m.retry(msg.what)
	case opsTickMsg:
		if msg.seq == m.screenSeq && m.screen == scrOperations {
			return m.loadScreen(scrOperations)
		}
		return nil
	case editReadyMsg:
		if msg.seq != m.editSeq {
			if msg.path != "" {
				_ = os.Remove(msg.path) // given up with esc
			}
			return nil
		}
		m.editOpening = false
		return m.editReady(msg)
	case editorDoneMsg:
		return m.editorDone(msg)
	case editSavedMsg:
		return m.editSaved(msg)
	case replayPreviewMsg:
		return m.replayPreviewed(msg)
	case replayDoneMsg:
		return m.replayDone(msg)
	case idleTickMsg:
		return m.idleTick()
	case recountMsg:
		return m.recounted(msg)
	}
	return nil
}

// failed shows a banner for a failing load and retries it with backoff:
// 1s, 2s, 4s … up to 30s, one pending retry per kind of load. A backend
// that cannot do what is asked (ErrUnsupported) is said once, not
// retried.
func (m *Model) failed(what retryWhat, name string, err error) tea.Cmd {
	if m.ctx.Err() != nil {
		return nil
	}
	if isErr(err, engine.ErrUnsupported) {
		m.banner = fmt.Sprintf("%s: %s", name, termtext.Line(err.Error()))
		return nil
	}
	if isErr(err, engine.ErrDenied) {
		// A token the server does not take (or a role it refuses) is not
		// an outage: asking again will not help, so nothing is retried
		// and the header says refused, not unreachable.
		m.denied = true
		m.banner = fmt.Sprintf("%s refused: %s — start the console with a token the server accepts", name, termtext.Line(err.Error()))
		return nil
	}
	n, failing := m.failures[what]
	if failing && m.retrying[what] {
		// A load redone early (succeeded, the probe) failed again while
		// its retry is on its way: the backoff and its warning stand.
		return nil
	}
	m.failures[what] = n + 1
	wait := min(time.Second<<min(n, 5), 30*time.Second)
	m.banner = fmt.Sprintf("%s failed: %s — retrying in %s", name, termtext.Line(err.Error()), wait)
	if m.retrying[what] {
		return nil
	}
	m.retrying[what] = true
	m.log.Warn("console load failed", "what", name, "err", err, "retry_in", wait)
	return tea.Tick(wait, func(time.Time) tea.Msg { return retryMsg{what: what} })
}

// succeeded notes a load that worked. An answer says the API may be
// back, so the loads still waiting out their backoff are redone now
// instead of up to 30s later. The warning goes when none is failing: an
// answer of the API's meta says nothing of its store, which may still be
// away (each redone load clears its own failure when it works).
func (m *Model) succeeded(what retryWhat) tea.Cmd {
	delete(m.failures, what)
	if len(m.failures) == 0 {
		m.banner = ""
		return nil
	}
	var cmds []tea.Cmd
	for w := range m.failures {
		cmds = append(cmds, m.load(w))
	}
	return tea.Batch(cmds...)
}

// unreachable reports whether a load is failing (the API or the store is
// away): the header says so instead of live.
func (m *Model) unreachable() bool { return len(m.failures) > 0 }

// load redoes one kind of load now.
func (m *Model) load(what retryWhat) tea.Cmd {
	switch what {
	case retryMeta:
		return m.loadMeta()
	case retryCounts:
		return m.loadCounts()
	case retryList:
		return m.jobs.retry(m)
	case retryScreen:
		if m.screen != scrJobs {
			return m.loadScreen(m.screen)
		}
	case retrySubscribe:
		if m.sub == nil && !m.subscribing && !m.opts.NoSubscribe {
			return m.subscribe()
		}
	}
	return nil
}

func (m *Model) retry(what retryWhat) tea.Cmd {
	delete(m.retrying, what)
	if _, failing := m.failures[what]; !failing {
		return nil // it worked meanwhile
	}
	return m.load(what)
}

// changes coalesces live changes into one refresh after a short delay.
// A stream that says it is lost (a client that reconnects by itself
// could not at once: the server is away) is a failing load from then on,
// as a stream that ends is: the header says unreachable at once, not at
// the next probe, and the resync that says it is back clears it.
func (m *Model) changes(msg changesMsg) tea.Cmd {
	if msg.ch != m.sub {
		return nil // from a subscription given up
	}
	var cmds []tea.Cmd
	reload := false
	for _, c := range msg.changes {
		switch c.Kind {
		case engine.ChangeLost:
			err := c.Err
			if err == nil {
				err = errors.New("stream lost")
			}
			cmds = append(cmds, m.failed(retrySubscribe, "live updates", err))
			continue // nothing to reload from a server that is away
		case engine.ChangeResync:
			if _, failing := m.failures[retrySubscribe]; failing {
				cmds = append(cmds, m.succeeded(retrySubscribe))
			}
			// Changes were missed: the open sheet's job among them, maybe.
			m.sheet.stale = m.sheet.open && m.sheet.id != ""
		case engine.ChangeJob, engine.ChangeOperation:
			// A change that names no job (another process's, heard
			// through the counters or a wake-up: a reaper's, a worker's)
			// or an operation's may be the sheet's job: it is read again.
			if m.sheet.open && m.sheet.id != "" && (c.JobID == "" || c.JobID == m.sheet.id) {
				m.sheet.stale = true
			}
		}
		reload = true
	}
	if msg.closed {
		m.sub = nil
		if m.ctx.Err() == nil && !m.opts.NoSubscribe {
			cmds = append(cmds, m.failed(retrySubscribe, "live updates", fmt.Errorf("stream ended")))
		}
	} else {
		cmds = append(cmds, waitChanges(m.ctx, m.sub))
	}
	if reload && !m.refreshArmed {
		m.refreshArmed = true
		cmds = append(cmds, tea.Tick(m.opts.RefreshDelay, func(time.Time) tea.Msg { return refreshTickMsg{} }))
	}
	return tea.Batch(cmds...)
}

// refresh reloads what is on screen, keeping the cursor on its job, and
// redoes at once every load that is waiting to be retried.
func (m *Model) refresh() tea.Cmd {
	var cmds []tea.Cmd
	if m.countsBusy {
		m.countsAgain = true
	} else {
		cmds = append(cmds, m.loadCounts())
	}
	for w := range m.failures {
		if w != retryCounts && w != retryList && w != retryScreen {
			cmds = append(cmds, m.load(w))
		}
	}
	switch m.screen {
	case scrJobs:
		cmds = append(cmds, m.jobs.refresh(m))
		if m.sheet.open && m.sheet.id != "" && m.sheet.stale {
			m.sheet.stale = false
			cmds = append(cmds, m.loadDetail(m.sheet.id, false))
		}
	default:
		cmds = append(cmds, m.reloadScreen())
	}
	return tea.Batch(cmds...)
}

// reloadAll is ctrl+r: everything on screen is read again now — the
// counts, the list or screen, and the open sheet, whether or not a change
// was heard for it.
func (m *Model) reloadAll() tea.Cmd {
	if m.sheet.open && m.sheet.id != "" {
		m.sheet.stale = true
	}
	if m.screen != scrJobs && !m.screenBusy {
		// Not paced as a live reload is: the operator asked.
		m.screenNotBefore = time.Time{}
	}
	return m.refresh()
}

// reloadScreen is a live reload of the screen shown (not the jobs list):
// it waits for the load on its way, and paces itself after a slow one
// (screenNotBefore).
func (m *Model) reloadScreen() tea.Cmd {
	if m.screenBusy {
		m.screenAgain = true
		return nil
	}
	if wait := m.screenNotBefore.Sub(m.now()); wait > 0 {
		m.screenAgain = true
		if m.screenTick {
			return nil
		}
		m.screenTick = true
		return tea.Tick(wait, func(time.Time) tea.Msg { return screenTickMsg{} })
	}
	m.screenAgain = false
	return m.loadScreen(m.screen)
}

// switchScreen shows another screen and loads it.
func (m *Model) switchScreen(s screen) tea.Cmd {
	m.screen = s
	m.help = false
	if s == scrJobs {
		return m.jobs.reload(m)
	}
	if ls, _ := m.current(); ls != nil {
		// Its rows as last read may be minutes old (a group's LAST read
		// 8m while it was dying that second): "loading…" until read.
		ls.loaded, ls.err = false, nil
	}
	cmd := m.loadScreen(s)
	if s == scrOperations {
		return tea.Batch(cmd, m.opsTick())
	}
	return cmd
}

func (m *Model) opsTick() tea.Cmd {
	seq := m.screenSeq
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return opsTickMsg{seq: seq} })
}

// Toasts: short results with a time to live, in the bottom right corner.
// They give way to a dialog (a confirmation, the bulk dialog, the
// built-in editor): while one is open no toast is drawn, so none can
// cover its count or its keys (at 60×12 one covered the confirm key).
// Their time stops meanwhile: a toast that comes under a dialog waits
// for it to close, and one it covered shows for the rest of its time
// after, so each is read all the same.

type toast struct {
	id   int
	text string
	err  bool
	// left is how long it is still to be shown; since, when its current
	// showing began (zero while a dialog hides it); gen tags the tick
	// that ends that showing, so the tick of an earlier one is dropped.
	left  time.Duration
	since time.Time
	gen   uint64
}

func (m *Model) toast(text string) tea.Cmd { return m.addToast(text, false, 4*time.Second) }

func (m *Model) toastErr(text string) tea.Cmd { return m.addToast(text, true, 8*time.Second) }

func (m *Model) addToast(text string, isErr bool, ttl time.Duration) tea.Cmd {
	m.toastID++
	m.toasts = append(m.toasts, toast{id: m.toastID, text: text, err: isErr, left: ttl})
	if len(m.toasts) > 3 {
		m.toasts = m.toasts[len(m.toasts)-3:]
	}
	if isErr {
		m.log.Info("console error shown", "text", text)
	}
	return m.syncToasts()
}

// dialogOpen reports whether a dialog is on screen: toasts give way to it.
func (m *Model) dialogOpen() bool {
	return m.dialog != nil || (m.bulk != nil && m.bulk.visible) || m.editor != nil
}

// syncToasts stops the time of the toasts while a dialog is open, and
// starts it again once none is: what was left of it, at least a second.
func (m *Model) syncToasts() tea.Cmd {
	open := m.dialogOpen()
	now := m.now()
	var cmds []tea.Cmd
	for i := range m.toasts {
		t := &m.toasts[i]
		switch {
		case open && !t.since.IsZero():
			t.left -= now.Sub(t.since)
			t.since = time.Time{}
		case !open && t.since.IsZero():
			m.toastGen++
			t.since, t.gen = now, m.toastGen
			id, gen := t.id, t.gen
			cmds = append(cmds, tea.Tick(max(t.left, time.Second), func(time.Time) tea.Msg { return toastExpireMsg{id: id, gen: gen} }))
		}
	}
	return tea.Batch(cmds...)
}

// toastExpired takes a toast whose showing ended off the screen.
func (m *Model) toastExpired(msg toastExpireMsg) {
	m.toasts = slices.DeleteFunc(m.toasts, func(t toast) bool {
		return t.id == msg.id && t.gen == msg.gen && !t.since.IsZero()
	})
}

// quit ends the program and its background calls.
func (m *Model) quit() tea.Cmd {
	m.quitting = true
	m.cancel()
	return tea.Quit
}

// editorCommand is the user's editor, split into words.
func (m *Model) editorCommand() []string {
	for _, e := range []string{m.opts.Editor, m.getenv("VISUAL"), m.getenv("EDITOR")} {
		if f := strings.Fields(e); len(f) > 0 {
			return f
		}
	}
	return []string{"vi"}
}
