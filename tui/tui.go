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
	"fmt"
	"log/slog"
	"os"
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
	scrSchedules
	scrLimits
	scrAudit
)

var screenNames = []string{"jobs", "quarantine", "operations", "queues", "errors", "schedules", "limits", "audit"}

// Model is the console's one root model. It routes messages and keys to
// the screens and dialogs (each its own component, with its own Update,
// View and SetSize), lays them out, and tags every load so that stale
// answers are dropped (loads).
type Model struct {
	ctl  engine.Control
	opts Options
	ctx  context.Context

	km    *keymap.KeyMap
	theme *themes.Theme

	width, height int
	sess          sessionState
	tally         tally
	loads         loadTags
	idle          idleRecount
	live          liveState
	cache         caches

	screen screen
	// nav is where esc goes back to (nav.go).
	nav   []navFrame
	jobs  jobsView
	sheet sheetView
	// lists are the list screens (listscreen.go).
	lists listScreens

	dlg    dialogs
	edit   editing
	toasts toasts
}

// sessionState is what the console knows of its session: the rights and the
// look it was given, and the server's word on both.
type sessionState struct {
	cancel        context.CancelFunc
	baseKM        *keymap.KeyMap
	themeExplicit bool
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
	denied   bool
	quitting bool
}

// tally is the jobs counted, as the tabs show them.
type tally struct {
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
	// expiring: jobs per dead state retention deletes within the warning window (cmds.go).
	expiring    map[engine.State]int64
	expiringAt  time.Time
	expiringSeq uint64
}

// loadTags is the stale-answer machinery of the counts and the list
// screens: seq numbers every request, and an answer whose tag is not
// the newest of its kind is dropped.
type loadTags struct {
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
}

// caches hold what is drawn once and kept until what it shows changes.
type caches struct {
	// rowGen is bumped when every job row must be drawn again (width,
	// theme, the age tick).
	rowGen    uint64
	cols      jobCols
	colsKey   colsKey
	tabs      cached[tabsKey]
	title     cached[titleKey]
	help      cached[helpKey]
	head      cached[uint64]
	filter    cached[filterKey]
	cursorSGR struct {
		theme     *themes.Theme
		pre, post string
	}
}

// dialogs are the layers drawn over the screen that take the keys while
// open: the input line, a confirmation, the bulk dialog and the help.
type dialogs struct {
	input   *inputLine
	confirm *confirmDialog
	bulk    *bulkDialog
	help    helpScreen
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
		ctl: ctl, opts: opts, ctx: ctx,
		sess:  sessionState{cancel: cancel, baseKM: km},
		live:  liveState{failures: map[retryWhat]int{}, retrying: map[retryWhat]bool{}},
		width: 80, height: 24,
	}
	m.sess.themeExplicit = opts.Theme != ""
	m.theme = themes.Resolve(opts.Theme, true, m.getenv)
	m.sess.readOnly = opts.ReadOnly
	m.applyKeys()
	m.jobs.init(opts)
	m.cache.rowGen = 1
	m.idle.lastInput = m.now() // opening the console is the first input: idle counts from here
	return m
}

// applyKeys derives the live keymap from the base one and the session's
// rights.
func (m *Model) applyKeys() {
	km := m.sess.baseKM
	if m.sess.readOnly {
		// Marks serve only actions: a read-only session has none.
		km = km.ReadOnly().Without(keymap.Mark, keymap.MarkAll, keymap.SelectAll)
	}
	if m.sess.notAdmin {
		km = km.Without(keymap.Delete, keymap.Pause, keymap.SetLimit)
	}
	if m.sess.hidePayload {
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

// now is the console's clock (Options.Now).
func (m *Model) now() time.Time { return m.opts.Now() }

// getenv reads the session's environment (Options.Getenv).
func (m *Model) getenv(k string) string { return m.opts.Getenv(k) }

// Run runs the console on the terminal until the user quits.
func Run(ctl engine.Control, opts Options, progOpts ...tea.ProgramOption) error {
	m := New(ctl, opts)
	defer m.sess.cancel()
	p := tea.NewProgram(m, progOpts...)
	_, err := p.Run()
	return err
}

// Close ends the session's background calls (Run does it on return).
func (m *Model) Close() { m.sess.cancel() }

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
			m.cache.rowGen++
			m.sheet.invalidate()
		}
		m.width, m.height = msg.Width, msg.Height
		m.sizeEditor()
		m.jobs.keepCursorVisible(m.listHeight())
		return m.maybeLoadMore()
	case tea.BackgroundColorMsg:
		if !m.sess.themeExplicit && !themes.NoColor(m.getenv) {
			m.setTheme(themes.Resolve("", msg.IsDark(), m.getenv))
		}
		return nil
	case tea.ColorProfileMsg:
		m.sess.profile = msg.Profile
		m.setTheme(m.theme)
		return nil
	case tea.KeyPressMsg:
		return m.handleKey(msg)
	case tea.MouseMsg:
		return m.handleMouse(msg)
	case tea.PasteMsg:
		if m.edit.editor != nil {
			return m.edit.editor.Update(m, msg)
		}
		if m.dlg.input != nil {
			return m.dlg.input.Update(m, msg)
		}
		return nil
	}
	return m.handleMsg(msg)
}

// setTheme draws with t from now on, adapted to the terminal's colours.
func (m *Model) setTheme(t *themes.Theme) {
	t = t.ForProfile(m.sess.profile)
	if t == m.theme {
		return
	}
	m.theme = t
	m.cache.rowGen++
	m.sheet.invalidate()
	if m.edit.editor != nil {
		m.edit.editor.ta.SetStyles(t.Editor)
	}
	if m.dlg.input != nil {
		m.dlg.input.restyle(t)
	}
}

// handleMsg routes the answers of commands and timers.
func (m *Model) handleMsg(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case uniqueHolderMsg:
		m.uniqueHolderSeen(msg)
		return nil
	case metaMsg:
		if msg.err != nil {
			return m.failed(retryMeta, "meta", msg.err)
		}
		cmd := m.succeeded(retryMeta)
		first := m.sess.meta == nil
		m.sess.meta = msg.meta
		if first {
			cmd = tea.Batch(cmd, m.countExpiring())
		}
		// A viewer sees no payloads; an inspector sees them but, as a
		// viewer, may change nothing (the server refuses every action of
		// both: the keys go rather than fail with 403).
		role := msg.meta.Role
		ro := m.opts.ReadOnly || msg.meta.ReadOnly || role == engine.RoleViewer || role == engine.RoleInspector
		hide := role == engine.RoleViewer
		notAdmin := role != "" && role != engine.RoleAdmin
		if ro != m.sess.readOnly || hide != m.sess.hidePayload || notAdmin != m.sess.notAdmin {
			m.sess.readOnly, m.sess.hidePayload, m.sess.notAdmin = ro, hide, notAdmin
			m.applyKeys()
			m.sheet.invalidate()
		}
		return cmd
	case countsMsg:
		if msg.seq != m.loads.countsSeq {
			return nil
		}
		m.loads.countsBusy = false
		again := m.loads.countsAgain
		m.loads.countsAgain = false
		if msg.err != nil {
			return m.failed(retryCounts, "counts", msg.err)
		}
		cmd := m.succeeded(retryCounts)
		m.tally.counts = msg.counts
		m.tally.fcounts, m.tally.fcountsFor, m.tally.fcountsOff = msg.fcounts, msg.fkey, msg.fOff
		if msg.expiring != nil {
			m.tally.expiring, m.tally.expiringAt = msg.expiring, m.now()
			m.tally.expiringSeq++
		}
		m.jobs.placeFromEnd(m)
		if again {
			cmd = tea.Batch(cmd, m.loadCounts())
		}
		return cmd
	case listMsg:
		return m.jobs.Update(m, msg)
	case detailMsg:
		return m.sheet.Update(m, msg)
	case actionMsg:
		return m.actionDone(msg)
	case signalMsg:
		return m.signalDone(msg)
	case bulkPreviewMsg, bulkAgeTickMsg, bulkStartedMsg, opPollMsg, opTickMsg, opCancelMsg:
		return m.bulkMsg(msg)
	case quarantineMsg, operationsMsg, queuesMsg, groupsMsg, schedulesMsg, limitsMsg, auditMsg:
		return m.screenLoaded(msg)
	case auditOpMsg:
		return m.auditOpened(msg)
	case scheduleActionMsg:
		return m.scheduleDone(msg)
	case groupVerdictMsg:
		return m.groupVerdictDone(msg)
	case releaseMsg:
		return m.released(msg)
	case opResumeMsg:
		return m.resumed(msg)
	case limitAskMsg:
		return m.askLimit(msg)
	case limitSetMsg:
		return m.limitSet(msg)
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
		m.live.subscribing = false
		if msg.err != nil {
			return m.failed(retrySubscribe, "live updates", msg.err)
		}
		m.live.sub = msg.ch
		return tea.Batch(m.succeeded(retrySubscribe), waitChanges(m.ctx, m.live.sub))
	case changesMsg:
		return m.changes(msg)
	case refreshTickMsg:
		m.live.refreshArmed = false
		return m.refresh()
	case screenTickMsg:
		m.loads.screenTick = false
		if m.loads.screenAgain && m.screen != scrJobs {
			return m.reloadScreen()
		}
		return nil
	case ageTickMsg:
		m.cache.rowGen++
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
		if !m.live.probing {
			m.live.probing = true
			cmds = append(cmds, m.probeStore())
		}
		return tea.Batch(append(cmds, m.countExpiring())...)
	case probeMsg:
		m.live.probing = false
		if msg.err != nil {
			return m.failed(retryCounts, "counts", msg.err)
		}
		if _, failing := m.live.failures[retryCounts]; failing {
			// Back: what is on screen is as old as the outage.
			return m.refresh()
		}
		return nil
	case toastExpireMsg:
		m.toasts.Update(msg)
		return nil
	case retryMsg:
		return m.retry(msg.what)
	case opsTickMsg:
		if msg.seq == m.loads.screenSeq && m.screen == scrOperations {
			return m.loadScreen(scrOperations)
		}
		return nil
	case editReadyMsg:
		if msg.seq != m.edit.seq {
			return msg.removeCmd() // given up with esc
		}
		m.edit.opening = false
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

// switchScreen shows another screen and loads it.
func (m *Model) switchScreen(s screen) tea.Cmd {
	m.screen = s
	m.dlg.help.open = false
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

// quit ends the program and its background calls.
func (m *Model) quit() tea.Cmd {
	m.sess.quitting = true
	m.sess.cancel()
	return tea.Quit
}
