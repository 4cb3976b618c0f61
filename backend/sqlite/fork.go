package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

const (
	// ?1 original, ?2 the copy's id, ?3 now, ?4 the copy's checkpoint.
	// The copy carries the original's unique key, as a retry with input's.
	sqlInsertForkCopy = `INSERT INTO jobs (id, queue, kind, payload, schema_version, metadata, tags, priority,
		state, max_attempts, fingerprint, scheduled_at, timeout_ns, created_at, state_changed_at, checkpoint,
		unique_key, unique_states)
	SELECT ?2, queue, kind, payload, schema_version, metadata, tags, priority,
		'available', max_attempts, fingerprint, ?3, timeout_ns, ?3, ?3, ?4, unique_key, unique_states
	FROM jobs WHERE id = ?1
	ON CONFLICT (id) DO NOTHING`
	// ?1 original, ?2 its checkpoint with the fork.
	sqlForkOriginal = `UPDATE jobs SET checkpoint = ?2, superseded_by = ?3, version = version + 1 WHERE id = ?1`
)

// JobFork inserts the replay of a terminal job from a step and records the
// fork on the original, which the replay supersedes, in one transaction.
func (s *Store) JobFork(ctx context.Context, p *backend.JobForkParams) (*sluicetype.Job, error) {
	st, err := s.stmts(ctx, sqlActionRead, sqlIsQuarantined, sqlInsertForkCopy, sqlForkOriginal, sqlInsertEvent, sqlGetJob)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.Job
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := readActionRow(ctx, tx.StmtContext(ctx, st[0]), p.ID)
		if err != nil {
			return err
		}
		if !r.state.Terminal() {
			return &sluicetype.StateError{Action: "replay from step", ID: p.ID, State: r.state, Allowed: sluicetype.TerminalStates()}
		}
		if r.version != p.Version {
			return fmt.Errorf("replay job %s: %w: it changed since it was read (version %d, now %d)", p.ID, sluicetype.ErrConflict, p.Version, r.version)
		}
		if r.fingerprint != "" {
			var q bool
			if err := tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, r.fingerprint).Scan(&q); err != nil {
				return fmt.Errorf("sqlite: replay job %s: %w", p.ID, err)
			}
			if q {
				return &sluicetype.QuarantinedError{Verb: "replay", ID: p.ID, Fingerprint: r.fingerprint}
			}
		}
		nowNs := now.UnixNano()
		res, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx, p.ID, p.NewID, nowNs, textOrNull(p.Checkpoint))
		if isUniqueHeld(err) {
			return uniqueHeldBy(ctx, tx, sqlCopyHolderOf, "replay", p.ID)
		}
		if err != nil {
			return fmt.Errorf("sqlite: replay job %s: %w", p.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: replay job %s: %w", p.ID, err)
		} else if n == 0 {
			return fmt.Errorf("replay job %s: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
		}
		if _, err := tx.StmtContext(ctx, st[3]).ExecContext(ctx, p.ID, textOrNull(p.OriginalCheckpoint), p.NewID); err != nil {
			return fmt.Errorf("sqlite: replay job %s: %w", p.ID, err)
		}
		out, err = s.finishCopy(ctx, tx, st[4], st[5], "replay job "+p.ID, r, p.ID, p.NewID, p.OriginalEvent, p.CopyEvent, nowNs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
