package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// retentionOf resolves a command's settings as the root does before
// running it and returns the engine config its --retention makes.
func retentionOf(t *testing.T, env map[string]string, args ...string) (engine.Config, error) {
	t.Helper()
	root := newRootEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Fatalf("find %v: %v", args, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatalf("flags %v: %v", rest, err)
	}
	cmd.SetContext(context.Background())
	if err := root.PersistentPreRunE(cmd, nil); err != nil {
		t.Fatalf("settings of %v: %v", args, err)
	}
	specs, err := cmd.Flags().GetStringSlice("retention")
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	var cfg engine.Config
	r := retentionFlag{specs: specs}
	return cfg, r.apply(&cfg)
}

// TestRetentionSettings: retention per queue and state comes from the
// config file (top level and per command), the environment and the flag
// of serve, worker, demo and tui, the flag beating the file.
func TestRetentionSettings(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	file := writeConfig(t, `
retention: [archived=30d]
serve:
  retention:
    - archived=60d
    - billing/archived=forever
    - billing/completed=1h
`)
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		archive time.Duration                  // the default for archived
		queue   map[engine.State]time.Duration // billing's overrides
		wantErr string
	}{
		{name: "serve from its section", args: []string{"serve", "--config", file},
			archive: 60 * day, queue: map[engine.State]time.Duration{engine.StateArchived: engine.Forever, engine.StateCompleted: time.Hour}},
		{name: "worker from the top level", args: []string{"worker", "--config", file}, archive: 30 * day},
		{name: "demo from the top level", args: []string{"demo", "--config", file}, archive: 30 * day},
		{name: "tui from the top level", args: []string{"tui", "--config", file}, archive: 30 * day},
		{name: "the flag beats the file", args: []string{"serve", "--config", file, "--retention", "archived=7d,billing/cancelled=0s"},
			archive: 7 * day, queue: map[engine.State]time.Duration{engine.StateCancelled: 0}},
		{name: "the environment beats the file", env: map[string]string{"SLUICE_RETENTION": "archived=2d"}, args: []string{"worker", "--config", file}, archive: 2 * day},
		{name: "none: the engine's defaults", args: []string{"worker"}, archive: 14 * day},
		{name: "a state that is not terminal", args: []string{"worker", "--retention", "running=1h"}, wantErr: "not a terminal state"},
		{name: "a bad duration", args: []string{"demo", "--retention", "archived=soon"}, wantErr: "want a whole number of days"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := retentionOf(t, tt.env, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Retention
			if got == nil {
				got = engine.DefaultRetention()
			}
			if got[engine.StateArchived] != tt.archive || got[engine.StateCompleted] != day {
				t.Errorf("retention %v, want archived %v and completed the default 1d", got, tt.archive)
			}
			if len(cfg.QueueRetention["billing"]) != len(tt.queue) {
				t.Errorf("billing %v, want %v", cfg.QueueRetention["billing"], tt.queue)
			}
			for st, d := range tt.queue {
				if got, ok := cfg.QueueRetention["billing"][st]; !ok || got != d {
					t.Errorf("billing/%s = %v, want %v", st, got, d)
				}
			}
		})
	}
}

// TestAuditRetentionFlag: --audit-retention sets the audit trail's own
// retention (90 days unless given), forever keeps it, and 0 is refused
// rather than deleting every record as it is written.
func TestAuditRetentionFlag(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want time.Duration
		bad  bool
	}{
		{"90d", 90 * 24 * time.Hour, false}, {"36h", 36 * time.Hour, false}, {"forever", engine.Forever, false},
		{"0s", 0, true}, {"soon", 0, true},
	} {
		var cfg engine.Config
		err := (&retentionFlag{audit: tc.flag}).apply(&cfg)
		if (err != nil) != tc.bad || (!tc.bad && cfg.AuditRetention != tc.want) {
			t.Errorf("--audit-retention %s: %v, %v; want %v (refused %v)", tc.flag, cfg.AuditRetention, err, tc.want, tc.bad)
		}
	}
}
