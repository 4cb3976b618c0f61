package tui

import (
	"context"
	"os"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/keymap"
)

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
