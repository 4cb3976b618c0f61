package tui

import (
	"testing"
	"time"
)

// TestDurationsAheadRoundUp: what is still to come rounds up, so an ETA
// never promises less than is left (1m59s was "1m", and a retention 14
// days ahead read "in 13d"); a rate keeps a decimal below 10, so a run
// at 1.9/s under a limit of 2 does not read "1/s" (found walking the
// bulk dialog).
func TestDurationsAheadRoundUp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {-time.Second, "0s"}, {300 * time.Millisecond, "1s"}, {5 * time.Second, "5s"},
		{5200 * time.Millisecond, "6s"}, {59 * time.Second, "59s"}, {59500 * time.Millisecond, "1m"},
		{119 * time.Second, "2m"}, {time.Hour - time.Second, "1h"}, {90 * time.Minute, "2h"},
		{47 * time.Hour, "47h"}, {48 * time.Hour, "2d"}, {14*24*time.Hour - 5*time.Minute, "14d"},
	} {
		if got := shortDurUp(c.d); got != c.want {
			t.Errorf("shortDurUp(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	for _, c := range []struct {
		r    float64
		want string
	}{{0, "0.0/s"}, {1.85, "1.9/s"}, {5.43, "5.4/s"}, {9.96, "10/s"}, {3725.4, "3,725/s"}} {
		if got := perSecond(c.r); got != c.want {
			t.Errorf("perSecond(%v) = %q, want %q", c.r, got, c.want)
		}
	}
}
