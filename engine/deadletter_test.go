package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/testlog"
)

// syncBuffer is a buffer safe for the engine's goroutines.
type syncBuffer = testlog.Buffer

// TestDeadLetterRuleWithoutHandlerWarned: Start warns about each
// dead-letter kind a rule names that has no handler in the engine, and
// not about one that has.
func TestDeadLetterRuleWithoutHandlerWarned(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e, err := engine.New(sqlitetest.New(t), engine.Config{
		Queues:     map[string]engine.QueueConfig{"q": {Concurrency: 1}},
		DeadLetter: &engine.DeadLetterRule{Kind: "triage.missing"},
		Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *engine.Job) error { return nil }
	for _, k := range []engine.Kind{
		{Name: "a", Handler: noop, DeadLetter: &engine.DeadLetterRule{Kind: "triage.here"}},
		{Name: "b", Handler: noop, DeadLetter: &engine.DeadLetterRule{Kind: "triage.gone"}},
		{Name: "triage.here", Handler: noop},
	} {
		if err := e.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{"dead_letter_kind=triage.missing routed_from=(default)", "dead_letter_kind=triage.gone routed_from=b"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not warn %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "dead_letter_kind=triage.here") {
		t.Errorf("warned about a dead-letter kind that has a handler:\n%s", out)
	}
}
