package tui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// hungControl is a server that stopped answering: while down, every read
// waits until it is back (then answers), so no load and no probe can
// tell the console it is away. Its live stream is the test's to feed.
type hungControl struct {
	engine.Control
	stream chan engine.Change
	mu     sync.Mutex
	back   chan struct{} // closed while up
}

func newHungControl(ctl engine.Control) *hungControl {
	c := &hungControl{Control: ctl, stream: make(chan engine.Change, 8), back: make(chan struct{})}
	close(c.back)
	return c
}

func (c *hungControl) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.back:
		if down {
			c.back = make(chan struct{})
		}
	default:
		if !down {
			close(c.back)
		}
	}
}

func (c *hungControl) wait(ctx context.Context) error {
	c.mu.Lock()
	back := c.back
	c.mu.Unlock()
	select {
	case <-back:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *hungControl) Subscribe(context.Context) (<-chan engine.Change, error) { return c.stream, nil }

func (c *hungControl) Meta(ctx context.Context) (*engine.Meta, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Control.Meta(ctx)
}

func (c *hungControl) Counts(ctx context.Context, q string) (*engine.Counts, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Control.Counts(ctx, q)
}

func (c *hungControl) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Control.ListJobs(ctx, p)
}

// TestStreamLostSaysUnreachable: attached over HTTP, the API server
// dies; the client's event stream, which reconnects by itself, cannot
// reopen at once and says the stream is lost. The header turns to
// unreachable on that word, with the reason on the status line, without
// waiting for the probe (which here could never answer: the header said
// "● live" for 5 to 9 s while only the probe could find the outage).
// When the stream is back (resync) the header says live again by
// itself, no key pressed.
func TestStreamLostSaysUnreachable(t *testing.T) {
	f := setup(t, false)
	ctl := newHungControl(f.eng)
	s := start(t, ctl, testOptions())
	t.Cleanup(func() { ctl.setDown(false) }) // before the program ends
	s.waitFor("evil-0001", "archived 7", "● live")
	header := func() string { return strings.SplitN(ansi.Strip(s.h.last()), "\n", 2)[0] }

	ctl.setDown(true)
	ctl.stream <- engine.Change{Kind: engine.ChangeLost, Err: fmt.Errorf("GET /events: unavailable: %w", errDown)}
	waitCond(t, "the header says unreachable on the stream's word", func() bool {
		return strings.Contains(header(), "○ unreachable")
	})
	if h := header(); strings.Contains(h, "● live") {
		t.Fatalf("the header says live with the stream lost: %s", h)
	}
	s.waitFor("live updates failed", "connection refused")

	ctl.setDown(false)
	ctl.stream <- engine.Change{Kind: engine.ChangeResync}
	s.waitGone("⚠")
	waitCond(t, "the header says live again", func() bool {
		h := header()
		return strings.Contains(h, "● live") && !strings.Contains(h, "unreachable")
	})
	s.waitFor("evil-0001", "archived 7")
}

// TestStaleStreamDropped: changes of a subscription the console has
// given up (it subscribed again since) are dropped: a lost word from the
// old stream does not turn the header.
func TestStaleStreamDropped(t *testing.T) {
	m := stillModel(t, goldenW, goldenH)
	old, cur := make(chan engine.Change), make(chan engine.Change)
	m.live.sub = cur
	m.handleMsg(changesMsg{ch: old, changes: []engine.Change{{Kind: engine.ChangeLost, Err: errDown}}})
	if m.unreachable() {
		t.Fatal("a lost word from a stream given up turned the header")
	}
	m.handleMsg(changesMsg{ch: cur, changes: []engine.Change{{Kind: engine.ChangeLost, Err: errDown}}})
	if !m.unreachable() {
		t.Fatal("a lost word from the stream in use did not turn the header")
	}
	m.handleMsg(changesMsg{ch: cur, changes: []engine.Change{{Kind: engine.ChangeResync}}})
	if m.unreachable() {
		t.Fatal("the resync of the stream in use left the header unreachable")
	}
}
