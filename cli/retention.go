package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/engine"
)

// retentionFlag is --retention, the retention of terminal jobs that an
// engine's maintenance applies (serve, worker, demo and tui run one). It
// is a setting: SLUICE_RETENTION and the config file give it too, as a
// list (retention: [archived=30d, billing/completed=1h]).
type retentionFlag struct {
	specs []string
	// audit is --audit-retention: how long the audit trail keeps a
	// record, apart from the jobs' retention.
	audit string
	// archive is --archive-queues (archive.go): what the sweep keeps.
	archive archiveQueuesFlag
}

const retentionUsage = "retention of terminal jobs, [QUEUE/]STATE=DURATION, comma-separated or repeated: " +
	"archived=30d, billing/completed=1h, email/cancelled=forever (default completed and cancelled 1d, archived, quarantined and undecodable 14d)"

func (r *retentionFlag) add(f *pflag.FlagSet) {
	f.StringSliceVar(&r.specs, "retention", nil, retentionUsage)
	f.StringVar(&r.audit, "audit-retention", "90d", "how long the audit trail keeps a record of an operator action: 90d, 2160h or forever")
	r.archive.add(f)
}

// apply sets cfg's retention: the engine's defaults with the flag's
// settings over them, per queue where one is named.
func (r *retentionFlag) apply(cfg *engine.Config) error {
	if r.audit != "" {
		d, err := engine.ParseRetentionDuration(r.audit)
		if err != nil {
			return fmt.Errorf("--audit-retention: %w", err)
		}
		if d == 0 {
			return fmt.Errorf("--audit-retention 0 would delete every record as it is written: give a duration or forever")
		}
		cfg.AuditRetention = d
	}
	if len(r.specs) == 0 {
		return nil
	}
	defaults, perQueue, err := engine.ParseRetention(r.specs)
	if err != nil {
		return fmt.Errorf("--retention: %w", err)
	}
	cfg.Retention = engine.DefaultRetention()
	for st, d := range defaults {
		cfg.Retention[st] = d
	}
	if len(perQueue) > 0 {
		cfg.QueueRetention = perQueue
	}
	return nil
}
