package backend

import "context"

// A fault seam for tests of atomicity: a write carries a hook in its
// context, and a store whose writes are transactions calls it after the
// write's statements and before its COMMIT. The dead-letter fault test
// kills its process there, proving a death and its dead-letter job are
// committed together or not at all.

type beforeCommitKey struct{}

// WithBeforeCommit returns ctx carrying fn, to be called by the store
// between a write's last statement and its commit.
func WithBeforeCommit(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, beforeCommitKey{}, fn)
}

// BeforeCommit calls the hook ctx carries, if any. Stores call it just
// before they commit a write transaction.
func BeforeCommit(ctx context.Context) {
	if fn, ok := ctx.Value(beforeCommitKey{}).(func()); ok && fn != nil {
		fn()
	}
}

// CommitHooker is implemented by stores that call BeforeCommit: those
// whose writes have a point between their statements and their commit.
// A store whose every write is one atomic script (Redis) has none; a
// process dies before the script is sent or after it ran.
type CommitHooker interface {
	CallsBeforeCommit()
}
