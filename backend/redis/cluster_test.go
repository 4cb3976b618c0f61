package redis_test

import (
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/internal/redisserver"
)

// TestClusterConformance runs the conformance suite on a Redis Cluster of
// three masters (SLUICE_TEST_REDIS_CLUSTER, or a private one it starts on
// loopback ports): every script touches only keys of its
// namespace's hash tag, so every script runs on the one node that serves
// the namespace's slot, and a key outside it would fail the script.
func TestClusterConformance(t *testing.T) {
	base := redisserver.Cluster(t)
	backendtest.Run(t, backendtest.Harness{
		Name:     "redis-cluster",
		NewStore: func(t testing.TB) backend.Store { return redistest.NewOn(t, base) },
		Truth:    func(t testing.TB, s backend.Store) backendtest.Truth { return redistest.NewTruth(t, s) },
		Reopen:   redistest.Reopen,
	})
}
