package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

func TestParseStartAt(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	now := time.Date(2026, 12, 7, 21, 30, 0, 0, paris)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		// HH:MM is the next time the operator's clock shows it, sent in UTC.
		{"23:15", time.Date(2026, 12, 7, 22, 15, 0, 0, time.UTC)},
		{"06:00", time.Date(2026, 12, 8, 5, 0, 0, 0, time.UTC)},
		{"21:30", time.Date(2026, 12, 8, 20, 30, 0, 0, time.UTC)},
		{" 6:05 ", time.Date(2026, 12, 8, 5, 5, 0, 0, time.UTC)},
		{"2026-12-08T06:00:00+01:00", time.Date(2026, 12, 8, 5, 0, 0, 0, time.UTC)},
		{"2026-12-08T05:00:00.5Z", time.Date(2026, 12, 8, 5, 0, 0, 5e8, time.UTC)},
		{"tomorrow", time.Time{}},
		{"25:00", time.Time{}},
	} {
		got, err := engine.ParseStartAt(tc.in, now)
		if tc.want.IsZero() {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("%q: %v %v, want ErrInvalid", tc.in, got, err)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestStartMark(t *testing.T) {
	now := time.Date(2026, 12, 7, 2, 48, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		op   engine.Operation
		want string
	}{
		{engine.Operation{Status: engine.OperationPending, StartAt: at(3*time.Hour + 12*time.Minute)}, "scheduled for 06:00 (in 3h12m)"},
		{engine.Operation{Status: engine.OperationPending, StartAt: at(12*time.Minute + 30*time.Second)}, "scheduled for 03:00 (in 12m)"},
		{engine.Operation{Status: engine.OperationPending, StartAt: at(20 * time.Second)}, "scheduled for 02:48 (in under a minute)"},
		{engine.Operation{Status: engine.OperationPending, StartAt: at(50 * time.Hour)}, "scheduled for Wed 9 Dec 04:48 (in 2d2h)"},
		// Started, due or never scheduled: no mark.
		{engine.Operation{Status: engine.OperationRunning, StartAt: at(time.Hour)}, ""},
		{engine.Operation{Status: engine.OperationPending, StartAt: at(-time.Second)}, ""},
		{engine.Operation{Status: engine.OperationPending}, ""},
	} {
		if got := engine.StartMark(&tc.op, now); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.op, got, tc.want)
		}
	}
}
