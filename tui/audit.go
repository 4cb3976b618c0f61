package tui

import (
	"context"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
	"github.com/sluicehq/sluice/keymap"
)

// auditScreen is the Audit screen (:audit [query]): the newest records
// of the audit trail the query selects (actor:, action:, job:,
// operation:, since:, until:), one per operator action of every surface.
// Enter opens what the record names: its job's sheet, its operation's
// progress, its queue's or fingerprint's jobs, the schedules, error
// groups or limits screen.
type auditScreen struct {
	listScreen
	data []*engine.AuditRecord
	// query is the filter as typed, q as read.
	query string
	q     engine.AuditQuery
}

// auditMax is how many records the screen reads: the newest.
const auditMax = 200

type auditMsg struct {
	seq     uint64
	records []*engine.AuditRecord
	err     error
}

// auditOpMsg answers the read of a record's operation, to watch it.
type auditOpMsg struct {
	op  *engine.Operation
	err error
}

func (s *auditScreen) SetSize(w, h int) { s.listScreen.SetSize(w, h) }

func (s *auditScreen) len() int { return len(s.data) }

func (s *auditScreen) key(i int) string {
	if i < 0 || i >= len(s.data) {
		return ""
	}
	return s.data[i].ID
}

func loadAudit(ctl engine.Control, seq uint64, q engine.AuditQuery) func(context.Context) tea.Msg {
	return func(c context.Context) tea.Msg {
		q.Limit = auditMax
		page, err := ctl.Audit(c, q)
		if err != nil {
			return auditMsg{seq: seq, err: err}
		}
		return auditMsg{seq: seq, records: page.Records}
	}
}

// auditCommand is :audit [query]: the screen, filtered by the query.
func (m *Model) auditCommand(arg string) (tea.Cmd, error) {
	q, err := engine.ParseAuditQuery(arg, m.now())
	if err != nil {
		return nil, err
	}
	s := &m.lists.audit
	s.query, s.q = strings.TrimSpace(arg), q
	s.cursor, s.offset, s.loaded = 0, 0, false
	if m.screen == scrAudit {
		return m.loadScreen(scrAudit), nil
	}
	return m.goScreen(scrAudit), nil
}

// Update takes the records read and the keys on the cursor's row.
func (s *auditScreen) Update(m *Model, msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case auditMsg:
		s.data = msg.records
	case tea.KeyPressMsg:
		r := s.data[s.cursor]
		switch {
		case m.km.Matches(msg, keymap.Open):
			return m.openAudited(r)
		case m.km.Matches(msg, keymap.Copy):
			return tea.Batch(tea.SetClipboard(r.ID), m.toast("copied record "+termtext.Line(r.ID)))
		}
	}
	return nil
}

// openAudited opens what record r names: the job's sheet, the
// operation's progress, the queue's or the fingerprint's jobs, the
// screen of its schedule, error group or limit.
func (m *Model) openAudited(r *engine.AuditRecord) tea.Cmd {
	switch {
	case r.JobID != "":
		id := r.JobID
		cmd := m.toJobs(func(v *jobsView) {
			// Every state: the job may have moved since.
			v.setFilter("id:"+id, engine.Filter{IDs: []string{id}, States: engine.AllStates})
			v.seek = id
		})
		m.sheet.open, m.sheet.id = true, ""
		return cmd
	case r.Operation != "":
		ctl, ctx, id := m.ctl, m.ctx, r.Operation
		return func() tea.Msg {
			c, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			op, err := ctl.Operation(c, id)
			return auditOpMsg{op: op, err: err}
		}
	case r.Target != "" && (r.Action == "pause" || r.Action == "resume"):
		q := r.Target
		return m.toJobs(func(v *jobsView) { v.setFilter("queue:"+q, engine.Filter{Queues: []string{q}}) })
	case r.Target != "" && r.Action == "release_fingerprint":
		fp := r.Target
		return m.toJobs(func(v *jobsView) { v.setFilter("fingerprint:"+fp, engine.Filter{Fingerprint: fp}) })
	case strings.HasSuffix(r.Action, "_schedule"):
		return m.goScreen(scrSchedules)
	case strings.HasSuffix(r.Action, "_error_group"):
		return m.goScreen(scrErrors)
	case r.Action == "set_limit":
		return m.goScreen(scrLimits)
	}
	return m.toast(fmt.Sprintf("%s by %s: %s", r.Action, termtext.Line(r.Actor), termtext.Line(auditWhat(r))))
}

// auditOpened watches the operation a record named.
func (m *Model) auditOpened(msg auditOpMsg) tea.Cmd {
	if msg.err != nil {
		return m.toastErr(termtext.Line(msg.err.Error()))
	}
	return m.watchOperation(msg.op)
}

// View draws the records, newest first.
func (s *auditScreen) View(m *Model) []string {
	t, now := m.theme, m.now()
	cols := []colSpec{{"AGE", 5, true}, {"ACTOR", 12, false}, {"ROLE", 9, false}, {"SURFACE", 8, false},
		{"ACTION", 16, false}, {"RESULT", 11, false}, {"WHAT", 0, false}}
	empty := "no audit records yet"
	if s.query != "" {
		empty = "no audit records match " + termtext.Line(s.query)
	}
	return s.render(t, cols, len(s.data), func(i int) []cell {
		r := s.data[i]
		res := cell{termtext.Line(r.Result), t.OKText}
		if r.Result != engine.AuditOK {
			res.st = t.ErrorText
		}
		return []cell{
			{age(now, r.At), t.Cell}, {termtext.Line(r.Actor), t.Row}, {string(r.Role), t.Cell}, {string(r.Surface), t.Cell},
			{termtext.Line(r.Action), t.Row}, res, {termtext.Line(auditWhat(r)), t.Muted},
		}
	}, s.w, s.h, empty)
}

// auditWhat says in a few words what a record names: the job, the
// target, the applied action and count with its selector, the edited
// paths, why it was refused. An operation's id is left to enter, which
// opens it: a row has no room for it beside the selector.
func auditWhat(r *engine.AuditRecord) string {
	var parts []string
	if r.JobID != "" {
		parts = append(parts, "job "+r.JobID)
	}
	if len(r.IDs) > 0 {
		parts = append(parts, fmt.Sprintf("%d ids", len(r.IDs)))
	}
	if r.Target != "" {
		parts = append(parts, r.Target)
	}
	if r.Applied != "" {
		parts = append(parts, fmt.Sprintf("%s %s", r.Applied, plural(r.Count, "job", "jobs")))
	}
	if r.Selector != "" {
		parts = append(parts, r.Selector)
	}
	if len(r.Paths) > 0 {
		parts = append(parts, "paths "+strings.Join(r.Paths, ", "))
	}
	if r.Detail != "" && r.Result != engine.AuditOK {
		parts = append(parts, r.Detail)
	}
	return strings.Join(parts, " · ")
}

// auditScope is the screen title's note of its query ("" for none).
func (m *Model) auditScope() string {
	if q := m.lists.audit.query; q != "" {
		return " — " + termtext.Line(q)
	}
	return ""
}
