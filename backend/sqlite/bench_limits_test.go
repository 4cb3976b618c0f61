package sqlite_test

import (
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
)

// BenchmarkLimits: the claim loop with no limit, under a concurrency
// limit of 1,000 and under a rate limit (backendtest.BenchLimits).
func BenchmarkLimits(b *testing.B) {
	backendtest.BenchLimits(b, func(tb testing.TB) backend.Store { return sqlitetest.New(tb) })
}
