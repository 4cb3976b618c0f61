package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// TestQueryClockTime: a clock time is the last time the clock read it at
// or before now, in now's zone ("finalized<07:29" took 38 keys as
// finalized<2026-12-05T07:29:06.670003Z).
func TestQueryClockTime(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		name string
		q    string
		now  time.Time
		want time.Time
	}{
		{"earlier today", "finalized<07:29", time.Date(2026, 12, 5, 7, 40, 0, 0, time.UTC), time.Date(2026, 12, 5, 7, 29, 0, 0, time.UTC)},
		{"seconds", "finalized<07:29:06", time.Date(2026, 12, 5, 7, 40, 0, 0, time.UTC), time.Date(2026, 12, 5, 7, 29, 6, 0, time.UTC)},
		{"now itself", "created>07:40", time.Date(2026, 12, 5, 7, 40, 0, 0, time.UTC), time.Date(2026, 12, 5, 7, 40, 0, 0, time.UTC)},
		{"later is yesterday", "finalized<23:50", time.Date(2026, 12, 5, 0, 10, 0, 0, time.UTC), time.Date(2026, 12, 4, 23, 50, 0, 0, time.UTC)},
		{"one digit hour", "finalized<7:05", time.Date(2026, 12, 5, 7, 40, 0, 0, time.UTC), time.Date(2026, 12, 5, 7, 5, 0, 0, time.UTC)},
		{"in now's zone", "finalized<07:29", time.Date(2026, 12, 5, 7, 40, 0, 0, paris), time.Date(2026, 12, 5, 6, 29, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := engine.ParseQueryAt(tc.q, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			got := f.FinalizedBefore
			if got == nil {
				got = f.CreatedAfter
			}
			if got == nil || !got.Equal(tc.want) || got.Location() != time.UTC {
				t.Fatalf("%s at %s: %v, want %v (UTC)", tc.q, tc.now, got, tc.want)
			}
		})
	}
	for _, bad := range []string{"finalized<24:00", "finalized<07:60", "finalized<07:29:61", "finalized<7:5"} {
		if _, err := engine.ParseQueryAt(bad, time.Now()); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
}
