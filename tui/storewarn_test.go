package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// warnedControl is the fixture's engine with the durability warnings a
// Redis that keeps nothing on disk and evicts keys reports in Meta
// (backend/redis TestDurabilityWarningsPrivate shows them coming from a
// real server, through GET /meta too).
type warnedControl struct {
	engine.Control
	warnings []string
}

func (c *warnedControl) Meta(ctx context.Context) (*engine.Meta, error) {
	m, err := c.Control.Meta(ctx)
	if err != nil {
		return nil, err
	}
	m.Warnings = c.warnings
	return m, nil
}

// TestStoreWarningInHeader: a store that loses jobs silently is named in
// the header (a badge) and its reasons stay on the line under it, escaped;
// the state tabs still answer the mouse one line lower.
func TestStoreWarningInHeader(t *testing.T) {
	f := setup(t, false)
	ctl := &warnedControl{Control: f.eng, warnings: []string{
		"the server keeps nothing on disk (appendonly no, save empty): a restart loses every job",
		"maxmemory-policy is allkeys-lru, not noeviction: under memory pressure the server deletes jobs\x1b[2J",
	}}
	s := start(t, ctl, testOptions())
	screen := s.waitFor("NOT DURABLE", "keeps nothing on disk", "evil-0001", "archived 7")
	lines := strings.Split(screen, "\n")
	if !strings.Contains(lines[0], "NOT DURABLE") || !strings.HasPrefix(lines[1], "! store: the server keeps nothing") ||
		!strings.HasPrefix(lines[2], "! store: maxmemory-policy is allkeys-lru") {
		t.Fatalf("header:\n%s", screen)
	}
	if strings.Contains(screen, "\x1b[2J") {
		t.Fatal("a warning's escape sequence reached the terminal")
	}
	s.golden(screen)
}
