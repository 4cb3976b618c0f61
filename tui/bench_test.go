package tui

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// syntheticJobs makes n archived jobs with ids, queues, kinds and errors
// of realistic length.
func syntheticJobs(n int, now time.Time) []*engine.Job {
	queues := []string{"billing", "email", "reports"}
	kinds := []string{"invoice.generate", "receipt.send", "report.render"}
	jobs := make([]*engine.Job, n)
	for i := range jobs {
		at := now.Add(-time.Duration(i) * time.Second)
		jobs[i] = &engine.Job{
			ID:    fmt.Sprintf("0192f3a1-7c2e-7%03x-8a3b-%012x", i%4096, i),
			Queue: queues[i%3], Kind: kinds[i%3], State: engine.StateArchived,
			Attempt: 3, MaxAttempts: 3, CrashAttempt: i % 2,
			CreatedAt: at.Add(-time.Minute), StateChangedAt: at,
			Errors: []engine.AttemptError{{Attempt: 3, At: at, Message: fmt.Sprintf("dial tcp 10.0.%d.%d:5432: connect: connection refused", i%256, i%200)}},
		}
	}
	return jobs
}

// loadedModel is a console at w×h with n rows loaded, as if ListJobs had
// answered.
func loadedModel(tb testing.TB, n, w, h int) *Model {
	tb.Helper()
	now := time.Date(2026, 11, 29, 2, 14, 0, 0, time.UTC)
	m := New(nil, Options{NoSubscribe: true, Now: func() time.Time { return now }, Theme: "dark", Window: 20_000})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.loads.seq++
	m.jobs.listSeq = m.loads.seq
	m.Update(listMsg{seq: m.loads.seq, mode: listReplace, jobs: syntheticJobs(n, now)})
	m.tally.counts = &engine.Counts{Total: map[engine.State]int64{engine.StateArchived: int64(n)}}
	if len(m.jobs.rows) != n {
		tb.Fatalf("rows = %d, want %d", len(m.jobs.rows), n)
	}
	return m
}

// BenchmarkCursorMove is one cursor move and the frame it draws, at
// 200×60 with 10,000 rows loaded.
func BenchmarkCursorMove(b *testing.B) {
	m := loadedModel(b, 10_000, 200, 60)
	down := tea.KeyPressMsg{Code: 'j', Text: "j"}
	up := tea.KeyPressMsg{Code: 'k', Text: "k"}
	_ = m.View() // first frame fills the row cache
	b.ReportAllocs()
	b.ResetTimer()
	key := down
	for i := 0; b.Loop(); i++ {
		if i%2000 == 1000 {
			if key == down {
				key = up
			} else {
				key = down
			}
		}
		m.Update(key)
		v := m.View()
		if len(v.Content) == 0 {
			b.Fatal("empty frame")
		}
	}
}

// BenchmarkCursorMoveSheet is the same with the detail sheet open.
func BenchmarkCursorMoveSheet(b *testing.B) {
	m := loadedModel(b, 10_000, 200, 60)
	m.sheet.open = true
	down := tea.KeyPressMsg{Code: 'j', Text: "j"}
	_ = m.View()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.Update(down)
		m.View()
		if m.jobs.cursor >= len(m.jobs.rows)-1 {
			m.jobs.cursor = 0
		}
	}
}
