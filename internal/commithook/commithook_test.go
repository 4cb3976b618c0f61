package commithook_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/internal/commithook"
)

// TestHasIsWhatEachStoreDoes: Has answers, for every store, whether a
// write's context hook is called before its commit, as a write shows it.
func TestHasIsWhatEachStoreDoes(t *testing.T) {
	for name, open := range map[string]func(testing.TB) backend.Store{
		"sqlite":   func(tb testing.TB) backend.Store { return sqlitetest.New(tb) },
		"postgres": func(tb testing.TB) backend.Store { return pgtest.New(tb) },
		"redis":    func(tb testing.TB) backend.Store { return redistest.New(tb) },
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			if s.Backend() != name {
				t.Fatalf("opened %s, want %s", s.Backend(), name)
			}
			calls := 0
			ctx := commithook.With(context.Background(), func() { calls++ })
			res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{
				ID: "hooked", Queue: "q", Kind: "k", Payload: []byte(`{}`), MaxAttempts: 1,
			}}})
			if err != nil || len(res) != 1 || res[0].Err != nil {
				t.Fatalf("insert: %v %+v", err, res)
			}
			if got, want := calls > 0, commithook.Has(name); got != want {
				t.Errorf("%s called the hook %d times; Has says %v", name, calls, want)
			}
		})
	}
}
