package redis_test

import (
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/redis/redistest"
)

// TestConformance runs the backend conformance suite on a fresh namespace
// per check, all on one server.
func TestConformance(t *testing.T) {
	redistest.ServerURL(t)
	backendtest.Run(t, backendtest.Harness{
		Name:     "redis",
		NewStore: func(t testing.TB) backend.Store { return redistest.New(t) },
		Truth:    func(t testing.TB, s backend.Store) backendtest.Truth { return redistest.NewTruth(t, s) },
		Reopen:   redistest.Reopen,
	})
}
