package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// countingFlaky is flakyControl that counts its Meta calls.
type countingFlaky struct {
	flakyControl
	metaCalls atomic.Int64
}

func (c *countingFlaky) Meta(ctx context.Context) (*engine.Meta, error) {
	c.metaCalls.Add(1)
	return c.flakyControl.Meta(ctx)
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
