package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// bulkRunShape is what a bulk command was given, beyond its selector,
// that shapes the run it starts: the printed "run exactly this" command
// repeats every one of them, so that pasting it runs what was previewed
// at the pace and with the following that was asked for.
type bulkRunShape struct {
	rate int  // --rate: jobs per second at most
	wait bool // --wait: follow the operation to its end
	// at is --at's start time, absolute: a pasted HH:MM would name
	// another day once the clock has passed it.
	at *time.Time
	// canary is --canary and its companions.
	canary *engine.CanaryParams
}

// flags returns the shape as command-line flags, each led by a space.
func (b bulkRunShape) flags() string {
	var s strings.Builder
	if b.rate > 0 {
		fmt.Fprintf(&s, " --rate %d", b.rate)
	}
	if b.wait {
		s.WriteString(" --wait")
	}
	if b.at != nil {
		fmt.Fprintf(&s, " --at %s", b.at.UTC().Format(time.RFC3339))
	}
	s.WriteString(canaryShape(b.canary))
	return s.String()
}

// runExactly is the command that runs plan pl as it was previewed, against
// target (" --api URL" or " --store URL"), with the run's shape.
func runExactly(pl *engine.BulkPlan, target string, shape bulkRunShape) string {
	at := pl.Cutoff.UTC().Format(time.RFC3339Nano)
	return fmt.Sprintf("sluice bulk %s %s --cutoff %s%s%s", pl.Action, shellQuote("-q", pl.Selector.String()), at, shape.flags(), target)
}
