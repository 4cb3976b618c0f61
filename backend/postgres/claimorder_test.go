package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// TestInClaimOrder: a claim's rows, returned in no order, come out by
// group (never crashed, first crash, the lone suspect), then priority,
// scheduled_at and id compared as bytes.
func TestInClaimOrder(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(int64(s), 0).UTC() }
	mk := func(id string, group int32, prio, sched int) claimedJob {
		return claimedJob{job: &sluicetype.Job{ID: id, Priority: prio, ScheduledAt: at(sched)}, group: group}
	}
	for _, tc := range []struct {
		name string
		in   []claimedJob
		want []string
	}{
		{"none", nil, []string{}},
		{"priority before time", []claimedJob{mk("late-high", 0, 0, 9), mk("early-low", 0, 1, 1)}, []string{"late-high", "early-low"}},
		{"time before id", []claimedJob{mk("a", 0, 0, 2), mk("b", 0, 0, 1)}, []string{"b", "a"}},
		{"ids as bytes", []claimedJob{mk("b", 0, 0, 1), mk("B", 0, 0, 1), mk("a", 0, 0, 1)}, []string{"B", "a", "b"}},
		{"group first", []claimedJob{mk("suspect", 1, -5, 0), mk("lone", 2, -9, 0), mk("fresh", 0, 3, 5)},
			[]string{"fresh", "suspect", "lone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, j := range inClaimOrder(tc.in) {
				got = append(got, j.ID)
			}
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
		})
	}
}
