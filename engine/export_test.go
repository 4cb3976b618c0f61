package engine

import "context"

// HoldForTest puts j, claimed under its lease, among the jobs this engine
// holds, as a worker slot does: its handler still running, or returned
// when returned is set. The context it returns is the handler's, cancelled
// when the engine gives the job up.
func (e *Engine) HoldForTest(j *Job, returned bool) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	r := e.running.add(j, ctx, cancel)
	r.returned.Store(returned)
	return ctx
}

// RenewLeasesForTest runs one lease renewal of the held jobs.
func (e *Engine) RenewLeasesForTest(ctx context.Context) { e.renewLeases(ctx) }
