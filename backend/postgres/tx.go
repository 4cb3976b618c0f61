package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Enqueueing inside the caller's own transaction.

// WithTx returns a context under which the store's writes run inside tx,
// the caller's own transaction on the same database (each write in a
// savepoint of it), and commit or roll back with it. It is what EnqueueTx
// uses; any write of the store may run so.
func WithTx(ctx context.Context, tx pgx.Tx) context.Context {
	return context.WithValue(ctx, callerTxKey{}, tx)
}

// Enqueuer is what EnqueueTx enqueues through: an *engine.Engine.
type Enqueuer interface {
	Store() backend.Store
	EnqueueMany(ctx context.Context, jobs []sluicetype.EnqueueParams) ([]sluicetype.EnqueueResult, error)
}

// EnqueueTx enqueues jobs through e (which validates them, fills their
// defaults and computes their fingerprints, as e.EnqueueMany does) inside
// tx: the jobs exist if and only if tx commits. e must run on a
// PostgreSQL store on the database tx belongs to. Workers in other
// processes are woken when tx commits (the notification is part of it).
func EnqueueTx(ctx context.Context, e Enqueuer, tx pgx.Tx, jobs ...sluicetype.EnqueueParams) ([]sluicetype.EnqueueResult, error) {
	if _, ok := e.Store().(*Store); !ok {
		return nil, fmt.Errorf("postgres: enqueue in a transaction: %w: the engine's store is %s, not postgres", sluicetype.ErrUnsupported, e.Store().Backend())
	}
	return e.EnqueueMany(WithTx(ctx, tx), jobs)
}
