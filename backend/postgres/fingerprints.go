package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

var fingerprintColumns = `f.fingerprint, f.kind, f.status, f.since, f.crashes, f.last_error, f.last_job_id,
	(SELECT count(*) FROM {s}.jobs WHERE ` + fingerprintIs("{s}.job_fingerprints", "jobs.", "f.fingerprint") + ` AND jobs.state = 'quarantined')`

func scanFingerprint(row pgx.Row) (*sluicetype.Fingerprint, error) {
	var f sluicetype.Fingerprint
	var status string
	var since int64
	var crashes int32
	var held int64
	if err := row.Scan(&f.Fingerprint, &f.Kind, &status, &since, &crashes, &f.LastError, &f.LastJobID, &held); err != nil {
		return nil, err
	}
	f.Status, f.Since, f.Crashes, f.Held = sluicetype.FingerprintStatus(status), fromNanos(since), int(crashes), int(held)
	return &f, nil
}

// FingerprintGet returns a quarantine record or ErrNotFound.
func (s *Store) FingerprintGet(ctx context.Context, p *backend.FingerprintGetParams) (*sluicetype.Fingerprint, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	f, err := scanFingerprint(s.pool.QueryRow(ctx, s.sql(`SELECT `+fingerprintColumns+` FROM {s}.fingerprints f WHERE f.fingerprint = $1`), p.Fingerprint))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: fingerprint %s: %w", p.Fingerprint, err)
	}
	if err := s.addStepCrashes(ctx, []*sluicetype.Fingerprint{f}); err != nil {
		return nil, err
	}
	return f, nil
}

// FingerprintList lists quarantined and probationary fingerprints, the most
// recently quarantined first.
func (s *Store) FingerprintList(ctx context.Context, p *backend.FingerprintListParams) ([]*sluicetype.Fingerprint, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+fingerprintColumns+` FROM {s}.fingerprints f
		WHERE f.status IN ('quarantined', 'probation')
		ORDER BY f.since DESC, f.fingerprint LIMIT $1::bigint`), limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list fingerprints: %w", err)
	}
	defer rows.Close()
	var out []*sluicetype.Fingerprint
	for rows.Next() {
		f, err := scanFingerprint(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list fingerprints: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list fingerprints: %w", err)
	}
	if err := s.addStepCrashes(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// FingerprintRelease puts the record on probation and returns its held
// jobs to available with their crash counters reset, each with its event.
func (s *Store) FingerprintRelease(ctx context.Context, p *backend.FingerprintReleaseParams) (int, error) {
	if p.Spec.Has(backend.EffectDelete) || len(p.Spec.From) == 0 {
		return 0, fmt.Errorf("release fingerprint %s: %w: the spec must move jobs", p.Fingerprint, sluicetype.ErrInvalid)
	}
	n := 0
	err := s.writeTx(ctx, func(tx *wtx) error {
		n = 0
		tag, err := tx.Exec(ctx, tx.q(`UPDATE {s}.fingerprints SET status = 'probation' WHERE fingerprint = $1`), p.Fingerprint)
		if err != nil {
			return fmt.Errorf("postgres: release fingerprint %s: %w", p.Fingerprint, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
		}
		b := argBase(p.Spec)
		q := tx.q(`WITH old AS (SELECT id, state, queue FROM {s}.jobs WHERE ` + fingerprintIs("{s}.job_fingerprints", "", fmt.Sprintf("$%d", b)) +
			` AND state = ANY(` + fmt.Sprintf("$%d", b+1) + `::text[]) ORDER BY id FOR UPDATE),
		moved AS (UPDATE {s}.jobs SET ` + specSet(p.Spec) + ` FROM old WHERE jobs.id = old.id
			RETURNING jobs.id, jobs.attempt, old.state, old.queue),
		ev AS (INSERT INTO {s}.job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
			SELECT id, ` + fmt.Sprintf("$%d, $1, $%d, state, $%d, attempt, $%d", b+2, b+3, b+4, b+5) + ` FROM moved)
		SELECT queue, state, count(*) FROM moved GROUP BY queue, state`)
		a := append(setArgs(p.Spec, tx.nowNs, nil), p.Fingerprint, stateNames(p.Spec.From),
			string(p.Event.Kind), p.Event.Actor, string(p.Event.To), p.Event.Message)
		rows, err := tx.Query(ctx, q, a...)
		if err != nil {
			return fmt.Errorf("postgres: release fingerprint %s: %w", p.Fingerprint, err)
		}
		counts := countDeltas{}
		wake := map[string]bool{}
		for rows.Next() {
			var queue, state string
			var c int64
			if err := rows.Scan(&queue, &state, &c); err != nil {
				rows.Close()
				return fmt.Errorf("postgres: release fingerprint %s: %w", p.Fingerprint, err)
			}
			counts.move(queue, sluicetype.State(state), p.Spec.To, c)
			n += int(c)
			wake[queue] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: release fingerprint %s: %w", p.Fingerprint, err)
		}
		tx.keep(n)
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		if p.Spec.To == sluicetype.StateAvailable {
			return s.notifyQueues(ctx, tx, wake)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
