package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

const fingerprintColumns = `f.fingerprint, f.kind, f.status, f.since, f.crashes, f.last_error, f.last_job_id,
	(SELECT count(*) FROM jobs INDEXED BY jobs_fingerprint
		WHERE jobs.fingerprint = f.fingerprint AND jobs.state = 'quarantined')`

func scanFingerprint(sc scanner) (*sluicetype.Fingerprint, error) {
	var f sluicetype.Fingerprint
	var status string
	var since int64
	if err := sc.Scan(&f.Fingerprint, &f.Kind, &status, &since, &f.Crashes, &f.LastError, &f.LastJobID, &f.Held); err != nil {
		return nil, err
	}
	f.Status = sluicetype.FingerprintStatus(status)
	f.Since = fromNanos(since)
	return &f, nil
}

// FingerprintGet returns a quarantine record or ErrNotFound.
func (s *Store) FingerprintGet(ctx context.Context, p *backend.FingerprintGetParams) (*sluicetype.Fingerprint, error) {
	st, err := s.readStmt(ctx, `SELECT `+fingerprintColumns+` FROM fingerprints f WHERE f.fingerprint = ?`)
	if err != nil {
		return nil, err
	}
	f, err := scanFingerprint(st.QueryRowContext(ctx, p.Fingerprint))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: fingerprint %s: %w", p.Fingerprint, err)
	}
	if err := s.addStepCrashes(ctx, []*sluicetype.Fingerprint{f}); err != nil {
		return nil, err
	}
	return f, nil
}

// FingerprintList lists quarantined and probationary fingerprints, the most
// recently quarantined first.
func (s *Store) FingerprintList(ctx context.Context, p *backend.FingerprintListParams) ([]*sluicetype.Fingerprint, error) {
	st, err := s.readStmt(ctx, `SELECT `+fingerprintColumns+` FROM fingerprints f
		WHERE f.status IN ('quarantined', 'probation')
		ORDER BY f.since DESC, f.fingerprint LIMIT ?`)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := st.QueryContext(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list fingerprints: %w", err)
	}
	defer rows.Close()
	var out []*sluicetype.Fingerprint
	for rows.Next() {
		f, err := scanFingerprint(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list fingerprints: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list fingerprints: %w", err)
	}
	if err := s.addStepCrashes(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

const (
	sqlReleaseFingerprint = `UPDATE fingerprints SET status = 'probation' WHERE fingerprint = ?`
)

// sqlReleaseJobs writes the release spec on a fingerprint's jobs in one
// state: ?1 now, ?3 fingerprint, ?4 the state (?2, the set's deadline, is
// bound NULL). RETURNING gives new values, so each from-state is its own
// run of the statement.
func sqlReleaseJobs(spec backend.ActionSpec) string {
	return `UPDATE OR FAIL jobs SET ` + specSet(spec) + `
	WHERE fingerprint = ?3 AND state = ?4
	RETURNING id, attempt, queue`
}

// FingerprintRelease puts the record on probation and returns its held
// jobs to available with their crash counters reset.
func (s *Store) FingerprintRelease(ctx context.Context, p *backend.FingerprintReleaseParams) (int, error) {
	if p.Spec.Has(backend.EffectDelete) || len(p.Spec.From) == 0 {
		return 0, fmt.Errorf("release fingerprint %s: %w: the spec must move jobs", p.Fingerprint, sluicetype.ErrInvalid)
	}
	st, err := s.stmts(ctx, sqlReleaseFingerprint, sqlReleaseJobs(p.Spec), sqlInsertEvent)
	if err != nil {
		return 0, err
	}
	n := 0
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		n = 0
		r, err := tx.StmtContext(ctx, st[0]).ExecContext(ctx, p.Fingerprint)
		if err != nil {
			return fmt.Errorf("sqlite: release fingerprint %s: %w", p.Fingerprint, err)
		}
		if c, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: release fingerprint %s: %w", p.Fingerprint, err)
		} else if c == 0 {
			return fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
		}
		nowNs := now.UnixNano()
		type released struct {
			id, queue, from string
			attempt         int
		}
		var rs []released
		counts := countDeltas{}
		for _, from := range p.Spec.From {
			rows, err := tx.StmtContext(ctx, st[1]).QueryContext(ctx, nowNs, nil, p.Fingerprint, string(from))
			if err != nil {
				return fmt.Errorf("sqlite: release fingerprint %s: %w", p.Fingerprint, err)
			}
			for rows.Next() {
				x := released{from: string(from)}
				if err := rows.Scan(&x.id, &x.attempt, &x.queue); err != nil {
					rows.Close()
					return fmt.Errorf("sqlite: release fingerprint %s: %w", p.Fingerprint, err)
				}
				rs = append(rs, x)
				counts.move(x.queue, from, p.Spec.To, 1)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: release fingerprint %s: %w", p.Fingerprint, err)
			}
		}
		ev := tx.StmtContext(ctx, st[2])
		for _, x := range rs {
			if _, err := ev.ExecContext(ctx, x.id, string(p.Event.Kind), nowNs, p.Event.Actor,
				x.from, string(p.Event.To), x.attempt, p.Event.Message); err != nil {
				return fmt.Errorf("sqlite: release fingerprint %s: job %s: %w", p.Fingerprint, x.id, err)
			}
		}
		n = len(rs)
		tx.keep(n)
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
