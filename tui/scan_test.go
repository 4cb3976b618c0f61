package tui

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// scanControl is the fixture's engine answering the first page as a
// store at its scan budget does (backend/redis TestBoundedScan makes real
// ones; SQLite never is).
type scanControl struct{ engine.Control }

func (c scanControl) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	page, err := c.Control.ListJobs(ctx, p)
	if err == nil && p.Cursor == "" {
		page.Scan = &engine.ScanReport{Bounded: true, Scanned: 10000, Total: 1234567}
	}
	return page, err
}

// TestBoundedScanNote: a list the store cut at its scan budget says so
// under the list, with how far the scan got.
func TestBoundedScanNote(t *testing.T) {
	f := setup(t, false)
	s := start(t, scanControl{f.eng}, testOptions())
	s.golden(s.waitFor("evil-0001", "archived 7", "scanned 10,000 of 1,234,567 jobs — partial"))
}
