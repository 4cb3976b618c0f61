package engine

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestPlanReplayKeepsSpawnedChildren: a fork keeps the children spawned by
// the steps it keeps (a kept Spawn returns their ids again), and not those
// of the steps it runs again.
func TestPlanReplayKeepsSpawnedChildren(t *testing.T) {
	t.Parallel()
	cp := Checkpoint{
		Steps: []StepRecord{
			{Name: "prepare", State: StepCompleted, Result: json.RawMessage(`1`)},
			{Name: "pages", State: StepCompleted, Result: json.RawMessage(`["p~s2.0","p~s2.1"]`)},
			{Name: "pages-done", State: StepCompleted, Result: json.RawMessage(`{}`)},
			{Name: "retry-pages", State: StepCompleted, Result: json.RawMessage(`["p~s4.0"]`)},
			{Name: "merge", State: StepFailed},
		},
		Children: []string{"p~s2.0", "p~s2.1", "p~s4.0"},
	}
	raw, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step int
		want []string
	}{
		{1, nil},
		{2, nil},
		{3, []string{"p~s2.0", "p~s2.1"}},
		{4, []string{"p~s2.0", "p~s2.1"}},
		{5, []string{"p~s2.0", "p~s2.1", "p~s4.0"}},
	} {
		_, next, err := PlanReplay(&Job{ID: "p", Checkpoint: raw}, ReplayParams{Step: tc.step})
		if err != nil {
			t.Fatalf("replay from %d: %v", tc.step, err)
		}
		if !reflect.DeepEqual(next.Children, tc.want) {
			t.Errorf("replay from %d keeps children %v, want %v", tc.step, next.Children, tc.want)
		}
	}
}
