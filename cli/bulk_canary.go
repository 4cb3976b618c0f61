package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// canaryFlags are sluice bulk's canary flags (engine.CanaryParams).
type canaryFlags struct {
	size, window         int
	minSuccess, haltRate float64
	timeout              time.Duration
}

func (f *canaryFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.size, "canary", 0, "retry only: redrive this many jobs, spread across the selection, first; go on only if enough succeed, and halt when the redriven fail again")
	fl.Float64Var(&f.minSuccess, "canary-min-success", 0, "with --canary: the share of the sample that must succeed to go on (0–1; default 0.9)")
	fl.Float64Var(&f.haltRate, "halt-failure-rate", 0, "with --canary: halt when more than this share of the last --canary-window redriven failed again (default 0.2)")
	fl.IntVar(&f.window, "canary-window", 0, "with --canary: how many of the latest redriven jobs the halt rule looks at (default 100)")
	fl.DurationVar(&f.timeout, "canary-timeout", 0, "with --canary: the longest wait for the sample's outcomes (default 10m)")
}

// params is the canary asked for, nil for none; a canary flag without
// --canary is refused rather than ignored.
func (f *canaryFlags) params(cmd *cobra.Command) (*engine.CanaryParams, error) {
	if f.size == 0 {
		for _, name := range []string{"canary-min-success", "halt-failure-rate", "canary-window", "canary-timeout"} {
			if cmd.Flags().Changed(name) {
				return nil, fmt.Errorf("--%s needs --canary N", name)
			}
		}
		return nil, nil
	}
	return &engine.CanaryParams{Size: f.size, MinSuccess: f.minSuccess, HaltFailureRate: f.haltRate, Window: f.window, Timeout: f.timeout}, nil
}

// canaryText is a canary for the confirmation: "a canary of 50 first
// (90% must succeed; halting above 20% failed again)".
func canaryText(c *engine.CanaryParams) string {
	return fmt.Sprintf("a canary of %d first (%s must succeed; halting above %s failed again)",
		c.Size, percentOf(orDefault(c.MinSuccess, engine.DefaultCanaryMinSuccess)), percentOf(orDefault(c.HaltFailureRate, engine.DefaultHaltFailureRate)))
}

func orDefault(v, d float64) float64 {
	if v == 0 {
		return d
	}
	return v
}

func percentOf(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }

// canaryShape is the canary's flags for "run exactly this".
func canaryShape(c *engine.CanaryParams) string {
	if c == nil {
		return ""
	}
	s := fmt.Sprintf(" --canary %d", c.Size)
	if c.MinSuccess != 0 {
		s += fmt.Sprintf(" --canary-min-success %g", c.MinSuccess)
	}
	if c.HaltFailureRate != 0 {
		s += fmt.Sprintf(" --halt-failure-rate %g", c.HaltFailureRate)
	}
	if c.Window != 0 {
		s += fmt.Sprintf(" --canary-window %d", c.Window)
	}
	if c.Timeout != 0 {
		s += " --canary-timeout " + c.Timeout.String()
	}
	return s
}
