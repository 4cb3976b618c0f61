// Package commithook is a fault seam for tests of atomicity, kept out of
// the public API: a write carries a hook in its context, and a store whose
// writes are transactions calls it after the write's statements and before
// its COMMIT. The dead-letter fault test kills its process there, proving a
// death and its dead-letter job are committed together or not at all.
package commithook

import "context"

type key struct{}

// With returns ctx carrying fn, to be called by the store between a
// write's last statement and its commit.
func With(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, key{}, fn)
}

// Call calls the hook ctx carries, if any. Stores call it just before
// they commit a write transaction.
func Call(ctx context.Context) {
	if fn, ok := ctx.Value(key{}).(func()); ok && fn != nil {
		fn()
	}
}

// Has reports whether the store named backend (Store.Backend) calls the
// hook: those whose writes have a point between their statements and
// their commit. A store whose every write is one atomic script (Redis)
// has none; a process dies before the script is sent or after it ran.
// The package's test holds every store to this answer.
func Has(backend string) bool {
	switch backend {
	case "sqlite", "postgres":
		return true
	}
	return false
}
