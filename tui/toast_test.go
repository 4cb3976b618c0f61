package tui

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// slowApplyControl holds each Apply until the test lets it answer, so the
// answer of an action (and its toast) comes while a dialog is open.
type slowApplyControl struct {
	engine.Control
	release chan struct{}
	applied atomic.Int64
}

func (c *slowApplyControl) Apply(ctx context.Context, a engine.Action, ids []string) ([]engine.ActionResult, error) {
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer c.applied.Add(1)
	return c.Control.Apply(ctx, a, ids)
}

// TestToastsWaitForDialogs: a toast never covers an open dialog. At
// 60×12 the toast of an action whose answer came while a confirmation or
// the bulk preview was open was drawn over the dialog's last lines, where
// its confirm key is. Now the toast waits: the dialog is drawn whole,
// and the toast shows once the dialog closes.
func TestToastsWaitForDialogs(t *testing.T) {
	for _, size := range [][2]int{{60, 12}, {80, 24}} {
		w, h := size[0], size[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			f := setup(t, false)
			ctl := &slowApplyControl{Control: f.eng, release: make(chan struct{})}
			s := start(t, ctl, testOptions())
			s.waitFor("evil-0001", "rcp-0001")
			s.tm.Send(tea.WindowSizeMsg{Width: w, Height: h})
			waitCond(t, "the screen at its new size", func() bool {
				lines := strings.Split(ansi.Strip(s.h.last()), "\n")
				return len(lines) == h && wOf(lines[0]) <= w
			})
			s.waitFor("evil-0001", "rcp-0001")
			archived := func(n int) {
				t.Helper()
				re := regexp.MustCompile(fmt.Sprintf(`▸arch(ived)? %d\b`, n))
				waitCond(t, fmt.Sprintf("the tabs say %d archived", n), func() bool {
					return re.MatchString(strings.SplitN(ansi.Strip(s.h.last()), "\n", 3)[1])
				})
			}
			// top waits for the list behind the dialog to have reloaded
			// after the retry (its first row is prefix).
			top := func(prefix string) {
				t.Helper()
				waitCond(t, "the list's first row is "+prefix, func() bool {
					lines := strings.Split(ansi.Strip(s.h.last()), "\n")
					return len(lines) > 4 && strings.HasPrefix(lines[4], prefix)
				})
			}
			answer := func(n int64) {
				t.Helper()
				ctl.release <- struct{}{}
				waitCond(t, "the retry answered", func() bool { return ctl.applied.Load() == n })
			}

			// A retry on its way; a confirmation opens; its answer comes.
			s.keys("r")
			s.waitFor("Retry job evil-0001?")
			s.keys("y")
			s.waitGone("Retry job evil-0001?")
			s.keys("j", "r")
			s.waitFor("Retry job rcp-0001?", "y confirm · esc cancel")
			answer(1)
			archived(6)
			top("› rcp")
			screen := s.waitFor("Retry job rcp-0001?", "y confirm · esc cancel")
			if strings.Contains(screen, "1 retried") {
				t.Fatalf("a toast is drawn over the confirmation:\n%s", screen)
			}
			s.goldenAs("confirm", screen)
			s.keys("<esc>")
			s.waitFor("1 retried", "cancelled — nothing changed")

			// The same with the bulk preview open.
			s.keys("r")
			s.waitFor("Retry job ")
			s.keys("y")
			s.waitGone("Retry job ")
			s.keys("b")
			s.waitFor("Bulk retry — dry run", "retry 6 jobs", "y start")
			answer(2)
			archived(5)
			top("› inv")
			screen = s.waitFor("Bulk retry — dry run", "retry 6 jobs", "y start")
			if strings.Contains(screen, "1 retried") {
				t.Fatalf("a toast is drawn over the bulk preview:\n%s", screen)
			}
			dialogWhole(t, screen, h)
			s.goldenAs("bulk", screen)
			s.keys("<esc>")
			s.waitFor("1 retried", "bulk cancelled — nothing changed")
		})
	}
}

// TestWaitingToastsKeepTheirTime: a toast's time stops while a dialog
// hides it. One that comes under a dialog starts its time when the
// dialog closes; one a dialog covers shows for the rest of its time
// after, and the tick of its first showing does not take it away.
func TestWaitingToastsKeepTheirTime(t *testing.T) {
	m := stillModel(t, 60, 12)
	clock := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	m.opts.Now = func() time.Time { return clock }
	confirm := func() { m.dlg.confirm = &confirmDialog{title: "Retry job x?", yes: func() tea.Cmd { return nil }} }

	confirm()
	if cmd := m.toast("1 retried"); cmd != nil {
		t.Fatal("a toast that came under a dialog started its time")
	}
	if screen := plainScreen(m); strings.Contains(screen, "1 retried") || !strings.Contains(screen, "y confirm") {
		t.Fatalf("the toast is drawn over the dialog:\n%s", screen)
	}
	clock = clock.Add(10 * time.Second)
	if _, cmd := m.Update(keyMsg("<esc>")); cmd == nil {
		t.Fatal("the waiting toast's time did not start when the dialog closed")
	}
	if screen := plainScreen(m); !strings.Contains(screen, "1 retried") || !strings.Contains(screen, "cancelled — nothing changed") {
		t.Fatalf("after the dialog closed the toasts are not shown:\n%s", screen)
	}
	if got := m.toasts.list[0].left; got != 4*time.Second {
		t.Fatalf("the waiting toast has %s left, want all of its 4s", got)
	}

	// Shown for 3s, then covered by a dialog for a minute.
	first := toastExpireMsg{id: m.toasts.list[0].id, gen: m.toasts.list[0].gen}
	clock = clock.Add(3 * time.Second)
	confirm()
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 12}) // any message
	clock = clock.Add(time.Minute)
	m.Update(first) // its first showing's time is up, under the dialog
	if len(m.toasts.list) != 2 {
		t.Fatalf("a covered toast went while the dialog hid it: %+v", m.toasts.list)
	}
	m.Update(keyMsg("<esc>"))
	if got := m.toasts.list[0].left; got != time.Second {
		t.Fatalf("the covered toast has %s left, want the 1s it had", got)
	}
	m.Update(first)
	if screen := plainScreen(m); !strings.Contains(screen, "1 retried") {
		t.Fatalf("the tick of an earlier showing took the toast away:\n%s", screen)
	}
	m.Update(toastExpireMsg{id: m.toasts.list[0].id, gen: m.toasts.list[0].gen})
	if screen := plainScreen(m); strings.Contains(screen, "1 retried") {
		t.Fatalf("the toast outlived its time:\n%s", screen)
	}
}
