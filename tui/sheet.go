package tui

import (
	"slices"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/keymap"
)

// sheetView is the detail sheet beside the list: lifecycle, the attempt
// timeline with errors and traces, metadata, checkpoint, links, and the
// payload on demand (p).
type sheetView struct {
	open      bool
	id        string
	detail    *engine.JobDetail
	err       error
	detailSeq uint64
	// detailBusy: the newest detail load is on its way (the age tick's
	// re-read waits for it rather than making it stale).
	detailBusy bool
	stale      bool

	showPayload    bool
	payloadLoading bool
	payload        []string // sanitized pretty lines
	payloadErr     error
	payloadSeq     uint64

	scroll int
	// anchor is the lines that were at the sheet's top when its job was
	// read again, anchorAt where they were: the next draw puts them back
	// at the top, whatever came or went above them (a timeline entry
	// derived from an error the capped list let go).
	anchor   []string
	anchorAt int

	info      []string // rendered lines above the payload
	infoW     int
	infoOK    bool
	payloadAt int // line where the payload section starts
	// sections are the lines where the sheet's sections start (] and [).
	sections []int
	// scrollBefore is where the sheet was before p showed the payload:
	// hiding it goes back there.
	scrollBefore int
	// jumpToPayload scrolls to the payload once it has arrived.
	jumpToPayload bool
	// links are the jobs the links section names, from linksAt (its
	// heading's line; 0 when there is none): enter follows the one on
	// the sheet's top line (steps.go).
	links   []sheetLink
	linksAt int
	// linksEnd is the links section's last line (its hint), as last drawn.
	linksEnd int
	// children are the states of the job's spawned children, as read
	// with it.
	children map[string]engine.State
	// linkFocus: ] landed on the links section (even where the end of
	// the sheet holds the scroll short of it); any other section move
	// clears it. linkPick is the link enter follows then (from 0): the
	// step keys (J/K) move it over the links, a parent's children among
	// them; linkLineAt is each link's line, as last drawn, and
	// jumpToLink scrolls the picked one into view when next drawn.
	linkFocus  bool
	linkPick   int
	linkLineAt []int
	jumpToLink bool
	// trail is the sheets enter followed links from, the last on top:
	// esc goes back to the last, where it was (navigation is a stack).
	// Moving the list's cursor, or closing the sheet, starts over.
	trail []sheetPlace
	// focusSec is the section ] or [ went to last (-1 none), and
	// focusScroll the scroll it left; maxScroll is the most the sheet
	// scrolls, as last drawn.
	focusSec, focusScroll, maxScroll int
	// stepPick is the step the step keys (J/K) picked, from 1; 0 none.
	// The replay key (F) previews a replay of the job from it (steps.go,
	// replay.go). nSteps, stepLineAt (each step's line) and stepsEnd are
	// as last drawn; jumpToStep scrolls the picked step into view when
	// next drawn.
	stepPick   int
	nSteps     int
	stepLineAt []int
	stepsEnd   int // the line after the steps section's last
	jumpToStep bool

	// compare is how many runs back from the last the attempts compared
	// beside it start (compare.go); 0: none compared.
	compare int

	// w and h are the size the sheet is drawn at.
	w, h int
}

func (s *sheetView) invalidate() { s.infoOK = false }

// SetSize sets the size the sheet is drawn at, the rule on its left
// included.
func (s *sheetView) SetSize(w, h int) { s.w, s.h = w, h }

// reset points the sheet at another job.
func (s *sheetView) reset(id string) {
	s.id = id
	s.detail, s.err = nil, nil
	s.showPayload, s.payloadLoading, s.payload, s.payloadErr = false, false, nil, nil
	s.jumpToPayload = false
	s.scroll, s.scrollBefore = 0, 0
	s.anchor = nil
	s.stale = false
	s.linkFocus, s.linkPick, s.jumpToLink = false, 0, false
	// No link of the last job is followed while this one loads.
	s.links = nil
	s.focusSec, s.maxScroll = -1, -1
	s.stepPick, s.jumpToStep = 0, false
	s.compare = 0
	s.invalidate()
}

// sheetKey reports whether msg is one of the sheet's own keys, which
// the jobs screen hands to it (Payload aside, which opens the sheet).
func sheetKey(km *keymap.KeyMap, msg tea.KeyPressMsg) bool {
	for _, a := range []keymap.Action{keymap.SheetDown, keymap.SheetUp, keymap.NextSection, keymap.PrevSection,
		keymap.Links, keymap.StepDown, keymap.StepUp, keymap.ReplayStep, keymap.CompareAttempts} {
		if km.Matches(msg, a) {
			return true
		}
	}
	return false
}

// Update takes the answers of the sheet's loads and its own keys:
// scrolling, the sections, the links and the steps, and the payload.
func (s *sheetView) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case detailMsg:
		return s.take(m, msg)
	case tea.KeyPressMsg:
		km := m.km
		switch {
		case km.Matches(msg, keymap.SheetDown), km.Matches(msg, keymap.SheetUp):
			if !s.open {
				return nil
			}
			step := max(m.bodyHeight()/2, 1)
			if km.Matches(msg, keymap.SheetUp) {
				step = -step
			}
			s.scroll = max(s.scroll+step, 0)
			return nil
		case km.Matches(msg, keymap.NextSection), km.Matches(msg, keymap.PrevSection):
			if !s.open {
				return nil
			}
			d := 1
			if km.Matches(msg, keymap.PrevSection) {
				d = -1
			}
			if !s.jumpSection(d) && d > 0 {
				// Past the last section nothing moves: said, not silent.
				return m.toast("the last section of the sheet" + m.linksKeyNote())
			}
			return nil
		case km.Matches(msg, keymap.Links):
			return m.toLinks()
		case km.Matches(msg, keymap.StepDown):
			return m.moveStep(1)
		case km.Matches(msg, keymap.StepUp):
			return m.moveStep(-1)
		case km.Matches(msg, keymap.ReplayStep):
			return m.replayStep()
		case km.Matches(msg, keymap.Payload):
			return m.togglePayload()
		case km.Matches(msg, keymap.CompareAttempts):
			return m.compareAttempts()
		}
	}
	return nil
}

// sheetPlace is a sheet enter left by following a link: its job and the
// link picked, to come back to.
type sheetPlace struct {
	id       string
	linkPick int
}

// followLink points the sheet at the picked link's job, remembering
// where it was.
func (m *Model) followLink(id string) tea.Cmd {
	s := &m.sheet
	s.trail = append(s.trail, sheetPlace{id: s.id, linkPick: s.linkPick})
	if len(s.trail) > maxNav {
		s.trail = s.trail[len(s.trail)-maxNav:]
	}
	s.reset(id)
	return m.loadDetail(id, false)
}

// sheetBack goes back to the sheet the last link was followed from, its
// links in focus with the same link picked.
func (m *Model) sheetBack() tea.Cmd {
	s := &m.sheet
	p := s.trail[len(s.trail)-1]
	s.trail = s.trail[:len(s.trail)-1]
	s.reset(p.id)
	// Scrolled to the links once they are drawn again (jumpToLink).
	s.linkFocus, s.linkPick = true, p.linkPick
	s.jumpToLink = true
	return m.loadDetail(p.id, false)
}

// loaded takes a GetJob answer.
func (s *sheetView) take(m *Model, msg detailMsg) tea.Cmd {
	if msg.id != s.id {
		return nil
	}
	if msg.payload {
		if msg.seq != s.payloadSeq {
			return nil
		}
		s.payloadLoading = false
		if msg.err != nil {
			s.payloadErr = msg.err
		} else {
			s.payload = msg.lines
			s.payloadErr = nil
		}
		if msg.detail != nil {
			s.detail = msg.detail
		}
		s.invalidate()
		return nil
	}
	if msg.seq != s.detailSeq {
		return nil
	}
	s.detailBusy = false
	if msg.err != nil {
		// Shown in the sheet (a deleted job says not found); the next
		// live change or cursor move asks again.
		s.err = msg.err
		s.invalidate()
		return nil
	}
	s.err = nil
	if s.detail != nil && s.infoOK && s.scroll > 0 && s.scroll < len(s.info) {
		s.anchor = slices.Clone(s.info[s.scroll:min(s.scroll+3, len(s.info))])
		s.anchorAt = s.scroll
	}
	s.detail = msg.detail
	s.children = msg.children
	s.invalidate()
	return nil
}

// anchorLine is where lines a start in info, the place nearest at when
// they are there more than once.
func anchorLine(info, a []string, at int) (int, bool) {
	best, found := 0, false
	dist := func(i int) int { return max(i-at, at-i) }
	for i := 0; i+len(a) <= len(info); i++ {
		if slices.Equal(info[i:i+len(a)], a) && (!found || dist(i) < dist(best)) {
			best, found = i, true
		}
	}
	return best, found
}

// sheetFollow keeps the open sheet on the cursor's job.
func (m *Model) sheetFollow() tea.Cmd {
	if !m.sheet.open || m.screen != scrJobs {
		return nil
	}
	r := m.jobs.current()
	if r == nil {
		return nil
	}
	if r.job.ID == m.sheet.id {
		return nil
	}
	if t := m.sheet.trail; len(t) > 0 && t[0].id == r.job.ID {
		// A link followed from the cursor's job: a list load (a live
		// update) keeps the sheet where enter took it.
		return nil
	}
	m.sheet.trail = nil
	m.sheet.reset(r.job.ID)
	return m.loadDetail(r.job.ID, false)
}

// sheetWidth is the sheet's share of the screen: the list stays visible
// beside it on terminals of 100 columns or more; below that the sheet
// takes the body.
func (m *Model) sheetWidth() int {
	if m.width < 100 {
		return m.width
	}
	return max(m.width*9/20, 44)
}

// jumpSection scrolls the sheet to the next (d > 0) or the previous
// section's heading. The section it went to stays the current one while
// the scroll is where the jump left it, so ] goes on through the sections
// at the end of the sheet, which the end holds short of the top.
func (s *sheetView) jumpSection(d int) (moved bool) {
	was, wasScroll, wasSec := s.linkFocus, s.scroll, s.focusSec
	defer func() { moved = s.scroll != wasScroll || s.focusSec != wasSec || s.linkFocus != was }()
	defer func() {
		if s.linkFocus != was {
			s.invalidate()
		}
	}()
	s.linkFocus = false
	if len(s.sections) == 0 {
		return false
	}
	cur := -1
	for i, at := range s.sections {
		if at <= s.scroll {
			cur = i
		}
	}
	if s.focusSec >= 0 && s.scroll == s.focusScroll {
		cur = s.focusSec
	}
	next := cur + d
	if next < 0 {
		s.scroll, s.focusSec = 0, -1
		return false
	}
	next = min(next, len(s.sections)-1)
	at := s.sections[next]
	s.scroll = at
	if s.maxScroll >= 0 {
		s.scroll = min(at, s.maxScroll)
	}
	s.focusSec, s.focusScroll = next, s.scroll
	s.linkFocus = s.linksAt > 0 && at == s.linksAt
	if s.linkFocus {
		s.linkPick = 0
	}
	return false
}

// linksKeyNote names the links key for a toast, when the sheet has links.
func (m *Model) linksKeyNote() string {
	if k := m.km.B(keymap.Links).Help().Key; k != "" && m.km.Enabled(keymap.Links) && m.sheet.followable() > 0 {
		return "; " + k + " goes to its links"
	}
	return ""
}

// toLinks is the links key: from anywhere on the sheet to its links,
// the first picked; on them, the next link (round to the first after
// the last, the › moving with it).
func (m *Model) toLinks() tea.Cmd {
	s := &m.sheet
	if !s.open || s.detail == nil {
		return nil
	}
	n := s.followable()
	if n == 0 {
		return m.toast("this job has no links (forks, replays, dead letters, parent, children)")
	}
	if s.linkFocus {
		s.linkPick = (s.linkPick + 1) % n
	} else {
		s.linkFocus, s.linkPick = true, 0
		s.stepPick = 0
	}
	s.focusSec = -1
	for i, at := range s.sections {
		if at == s.linksAt {
			s.focusSec = i
		}
	}
	s.jumpToLink = true
	s.invalidate()
	return nil
}

// shortFP shows the start of a fingerprint: enough to tell them apart.
func shortFP(fp string) string {
	if len(fp) > 16 {
		return fp[:16] + "…"
	}
	return fp
}
