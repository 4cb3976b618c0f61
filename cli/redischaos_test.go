package cli_test

import (
	"testing"

	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/internal/chaos"
)

// TestFaultChaosRedis is the short seeded chaos run on Redis, with its
// faults: on the shared server (a namespace and a queue of the run's
// own) the workers' connections are cut (CLIENT KILL ID of every
// connection named by a client_name of the run's own, never the
// harness's nor anyone else's), and on a redis-server of the harness's
// own (--private, AOF with appendfsync always) the server is also
// restarted with SIGKILL: nothing it acknowledged may be lost.
func TestFaultChaosRedis(t *testing.T) {
	o := chaosOptions(t)
	cases := []struct {
		name    string
		store   func(t *testing.T) string
		private bool
	}{
		{"shared", func(t *testing.T) string { return redistest.URL(t) }, false},
		{"private", func(*testing.T) string { return "redis://" }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := o
			o.Store, o.Private = tc.store(t), tc.private
			// As on PostgreSQL: eight seconds are about the store's faults.
			o.Weights = map[string]int{chaos.FaultCut: 3, chaos.FaultOutage: 2}
			o.Ensure = []string{chaos.FaultCut, chaos.FaultOutage}
			rep := runChaos(t, o)
			if len(rep.Violations) > 0 {
				t.Fatalf("chaos on Redis (%s) seed %d: %d invariants broken, the first: %s (rerun with SLUICE_CHAOS_SEED=%d)",
					tc.name, o.Seed, len(rep.Violations), rep.Violations[0], o.Seed)
			}
			if rep.Store != "redis" || rep.Cuts == 0 || (tc.private && rep.Outages == 0) {
				t.Errorf("seed %d on %s drove %d cuts and %d server restarts; want each Redis fault the store offers at least once", o.Seed, rep.Store, rep.Cuts, rep.Outages)
			}
		})
	}
}
