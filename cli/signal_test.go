package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

func TestJobsSignalCommand(t *testing.T) {
	path := sqlitetest.Path(t)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Enqueue(ctx, engine.EnqueueParams{ID: "pay-1", Queue: "q", Kind: "checkout"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "sqlite://"+path)
	t.Setenv("SLUICE_ACTOR", "maya")

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		out     string // in standard output (code 0) or standard error
		signals int    // buffered for pay-1 after the command
	}{
		{"with payload", []string{"jobs", "signal", "pay-1", "paid", "--payload", `{"amount":42}`}, 0, "signal paid sent to pay-1", 1},
		{"without payload", []string{"jobs", "signal", "pay-1", "paid"}, 0, "signal paid sent to pay-1", 2},
		{"unknown job", []string{"jobs", "signal", "nope", "paid"}, 1, "not found", 2},
		{"bad name", []string{"jobs", "signal", "pay-1", "no way"}, 1, "signal", 2},
		{"payload not JSON", []string{"jobs", "signal", "pay-1", "paid", "--payload", `{"amount":`}, 1, "not JSON", 2},
	} {
		code, out, stderr := runCLI(t, "", tc.args...)
		got := out
		if tc.code != 0 {
			got = stderr
		}
		if code != tc.code || !strings.Contains(got, tc.out) {
			t.Fatalf("%s: exit %d, out %q, stderr %q; want exit %d with %q", tc.name, code, out, stderr, tc.code, tc.out)
		}
		sigs, err := s.SignalList(ctx, &backend.SignalListParams{JobID: "pay-1", Name: "paid"})
		if err != nil {
			t.Fatal(err)
		}
		if len(sigs) != tc.signals {
			t.Fatalf("%s: %d signals buffered, want %d", tc.name, len(sigs), tc.signals)
		}
	}
	sigs, err := s.SignalList(ctx, &backend.SignalListParams{JobID: "pay-1"})
	if err != nil {
		t.Fatal(err)
	}
	if string(sigs[0].Payload) != `{"amount":42}` || string(sigs[1].Payload) != "null" {
		t.Fatalf("payloads %s and %s", sigs[0].Payload, sigs[1].Payload)
	}
}
