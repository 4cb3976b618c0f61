package tui

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// TestRetrySupersededJobSaysWhatSupersededIt: r on a job retried with new
// input (or replayed) asks, naming its successor, and y retries it
// forced; a plain retry would be refused by the store.
func TestRetrySupersededJobSaysWhatSupersededIt(t *testing.T) {
	f := setup(t, false)
	if _, err := f.eng.RetryWithInput(context.Background(), "evil-0001",
		engine.RetryWithInputParams{Payload: json.RawMessage(`{"fixed":true}`), ID: "evil-0001-fixed"}); err != nil {
		t.Fatal(err)
	}
	s := start(t, f.eng, testOptions())
	s.waitFor("evil-0001")
	s.keys("r")
	s.waitFor("Retry superseded job evil-0001?", "superseded by evil-0001-fixed", "side effects again")
	s.keys("y")
	s.waitFor("1 retried")
	if !slices.Contains(f.events(t, "evil-0001"), engine.EventRetried) {
		t.Fatalf("evil-0001 not retried: %v", f.events(t, "evil-0001"))
	}
}
