package postgres

import (
	"cmp"
	"context"
	"fmt"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// JobFork inserts the replay of a terminal job from a step and records the
// fork on the original, which the replay supersedes, in one transaction.
func (s *Store) JobFork(ctx context.Context, p *backend.JobForkParams) (*sluicetype.Job, error) {
	var out *sluicetype.Job
	err := s.writeTx(ctx, func(tx *wtx) error {
		r, err := readActionRow(ctx, tx, p.ID)
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
			if err := tx.QueryRow(ctx, tx.q(sqlIsQuarantined), r.fingerprint).Scan(&q); err != nil {
				return fmt.Errorf("postgres: replay job %s: %w", p.ID, err)
			}
			if q {
				return &sluicetype.QuarantinedError{Verb: "replay", ID: p.ID, Fingerprint: r.fingerprint}
			}
		}
		// Named before the insert, which the index would abort.
		if held, err := uniqueHolderOf(ctx, tx, tx.q(sqlCopyHolderOf), "replay", p.ID, sluicetype.StateAvailable); err != nil || held != nil {
			return cmp.Or[error](err, held)
		}
		tag, err := tx.Exec(ctx, tx.q(sqlInsertForkCopy), p.ID, p.NewID, tx.nowNs, string(p.Checkpoint))
		if err != nil {
			return fmt.Errorf("postgres: replay job %s: %w", p.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("replay job %s: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
		}
		if _, err := tx.Exec(ctx, tx.q(sqlForkOriginal), p.ID, string(p.OriginalCheckpoint), p.NewID); err != nil {
			return fmt.Errorf("postgres: replay job %s: %w", p.ID, err)
		}
		out, err = s.finishCopy(ctx, tx, "replay job "+p.ID, r, p.ID, p.NewID, p.OriginalEvent, p.CopyEvent)
		return err
	})
	if err != nil {
		return nil, s.copyHeld(ctx, err, "replay", p.ID)
	}
	return out, nil
}
