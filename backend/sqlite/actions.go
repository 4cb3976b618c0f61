package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Operator actions on one job, applied from the engine's specs.

// specSet is the SET clause of an action spec: its state and effects,
// with ?1 the store's now and ?2 a new deadline or NULL. States and
// reasons are written as literals, so each spec's statements are prepared
// once. max_attempts takes CASE, not max(): a function call in the SET of
// a multi-row UPDATE gives the statement a statement journal (every page
// it writes is first copied aside), about a sixth of a bulk retry's UPDATE.
func specSet(spec backend.ActionSpec) string {
	var b strings.Builder
	b.WriteString("state = " + literal(string(spec.To)))
	if spec.Has(backend.EffectOneMoreAttempt) {
		b.WriteString(", max_attempts = CASE WHEN max_attempts > attempt THEN max_attempts ELSE attempt + 1 END")
	}
	if spec.Has(backend.EffectResetCrashes) {
		b.WriteString(", crash_attempt = 0")
	}
	if spec.Has(backend.EffectScheduleNow) {
		b.WriteString(", scheduled_at = ?1")
	}
	switch {
	case spec.Has(backend.EffectFinalize):
		b.WriteString(", finalized_at = ?1, terminal_reason = " + literal(string(spec.Reason)))
	case spec.Has(backend.EffectReopen):
		b.WriteString(", finalized_at = NULL, terminal_reason = ''")
	}
	if spec.Has(backend.EffectClearLease) {
		b.WriteString(", lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL")
	}
	b.WriteString(", state_changed_at = ?1, version = version + 1")
	if spec.Has(backend.EffectOneMoreAttempt) {
		b.WriteString(", deadline = CASE WHEN ?2 IS NOT NULL THEN ?2 WHEN deadline <= ?1 THEN NULL ELSE deadline END")
	}
	return b.String()
}

// literal quotes a word (a state, a reason) as an SQL string.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlActionOne is the statement of a spec on one job: ?1 now, ?2 deadline
// or NULL, ?3 id.
func sqlActionOne(spec backend.ActionSpec) string {
	if spec.Has(backend.EffectDelete) {
		return `DELETE FROM jobs WHERE id = ?3`
	}
	return `UPDATE jobs SET ` + specSet(spec) + ` WHERE id = ?3 RETURNING ` + jobColumnsNoPayload
}

const (
	sqlActionRead = `SELECT state, queue, attempt, fingerprint, superseded_by, version FROM jobs WHERE id = ?`
	// ?1 id, ?2 payload, ?3 fingerprint.
	sqlUpdatePayload = `UPDATE jobs SET payload = ?2, fingerprint = ?3, version = version + 1
		WHERE id = ?1 RETURNING ` + jobColumns
	// ?1 original id, ?2 new id, ?3 payload, ?4 fingerprint, ?5 now.
	// The copy carries the original's unique key: the index refuses it
	// while a job holds the key, and it holds the key otherwise.
	sqlInsertRetryCopy = `INSERT INTO jobs (id, queue, kind, payload, schema_version, metadata, tags, priority,
		state, max_attempts, fingerprint, scheduled_at, timeout_ns, created_at, state_changed_at, retry_of,
		unique_key, unique_states)
	SELECT ?2, queue, kind, ?3, schema_version, metadata, tags, priority,
		'available', max_attempts, ?4, ?5, timeout_ns, ?5, ?5, id, unique_key, unique_states
	FROM jobs WHERE id = ?1
	ON CONFLICT (id) DO NOTHING`
	// ?1 id, ?2 the copy's id.
	sqlSupersede = `UPDATE jobs SET superseded_by = ?2, version = version + 1 WHERE id = ?1`
)

// actionRow is what an action reads of a job before changing it.
type actionRow struct {
	state        sluicetype.State
	queue        string
	attempt      int
	fingerprint  string
	supersededBy string
	version      int64
}

func readActionRow(ctx context.Context, st *sql.Stmt, id string) (*actionRow, error) {
	var r actionRow
	var state string
	err := st.QueryRowContext(ctx, id).Scan(&state, &r.queue, &r.attempt, &r.fingerprint, &r.supersededBy, &r.version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: read job %s: %w", id, err)
	}
	r.state = sluicetype.State(state)
	return &r, nil
}

// JobAction applies an operator action's spec to one job.
func (s *Store) JobAction(ctx context.Context, p *backend.JobActionParams) (*sluicetype.Job, error) {
	spec := &p.Spec
	if spec.To == "" || len(spec.From) == 0 {
		return nil, fmt.Errorf("%s job %s: %w: empty action spec", spec.Action, p.ID, sluicetype.ErrInvalid)
	}
	st, err := s.stmts(ctx, sqlActionRead, sqlIsQuarantined, sqlActionOne(*spec), sqlInsertEvent)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.Job
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		out = nil
		r, err := readActionRow(ctx, tx.StmtContext(ctx, st[0]), p.ID)
		if err != nil {
			return err
		}
		if !spec.Allows(r.state) {
			return &sluicetype.StateError{Action: spec.Action, ID: p.ID, State: r.state, Allowed: spec.From}
		}
		if spec.Refuses(backend.RefuseSuperseded) && r.supersededBy != "" && !p.Force {
			return &sluicetype.SupersededError{ID: p.ID, By: r.supersededBy}
		}
		if spec.Refuses(backend.RefuseQuarantined) && r.fingerprint != "" {
			var q bool
			if err := tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, r.fingerprint).Scan(&q); err != nil {
				return fmt.Errorf("sqlite: %s job %s: %w", spec.Action, p.ID, err)
			}
			if q {
				return &sluicetype.QuarantinedError{Verb: string(spec.Action), ID: p.ID, Fingerprint: r.fingerprint}
			}
		}
		nowNs := now.UnixNano()
		if spec.Has(backend.EffectDelete) {
			if _, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx, nowNs, nil, p.ID); err != nil {
				return fmt.Errorf("sqlite: %s job %s: %w", spec.Action, p.ID, err)
			}
		} else {
			j, err := scanJob(tx.StmtContext(ctx, st[2]).QueryRowContext(ctx, nowNs, nanosPtr(p.Deadline), p.ID))
			if isUniqueHeld(err) {
				return uniqueHeld(ctx, tx, string(spec.Action), p.ID)
			}
			if err != nil {
				return fmt.Errorf("sqlite: %s job %s: %w", spec.Action, p.ID, err)
			}
			out = j
		}
		if spec.Event != "" {
			if _, err := tx.StmtContext(ctx, st[3]).ExecContext(ctx, p.ID, string(p.Event.Kind), nowNs, p.Event.Actor,
				string(r.state), string(p.Event.To), r.attempt, p.Event.Message); err != nil {
				return fmt.Errorf("sqlite: %s job %s: event: %w", spec.Action, p.ID, err)
			}
		}
		counts := countDeltas{}
		counts.move(r.queue, r.state, spec.To, 1)
		if out != nil {
			tx.keep(out)
		}
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobUpdatePayload replaces the payload and fingerprint of a job that is
// not running, if its version is still p.Version.
func (s *Store) JobUpdatePayload(ctx context.Context, p *backend.JobUpdatePayloadParams) (*sluicetype.Job, error) {
	st, err := s.stmts(ctx, sqlActionRead, sqlUpdatePayload, sqlInsertEvent)
	if err != nil {
		return nil, err
	}
	var out *sluicetype.Job
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		r, err := readActionRow(ctx, tx.StmtContext(ctx, st[0]), p.ID)
		if err != nil {
			return err
		}
		if r.state == sluicetype.StateRunning {
			return backend.PayloadNotEditable(p.ID, r.state)
		}
		if r.version != p.Version {
			return &sluicetype.VersionError{ID: p.ID, Have: r.version, Want: p.Version}
		}
		j, err := scanJob(tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, p.ID, string(p.Payload), p.Fingerprint))
		if err != nil {
			return fmt.Errorf("sqlite: edit payload of job %s: %w", p.ID, err)
		}
		if _, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx, p.ID, string(p.Event.Kind), now.UnixNano(),
			p.Event.Actor, string(r.state), string(r.state), r.attempt, p.Event.Message); err != nil {
			return fmt.Errorf("sqlite: edit payload of job %s: event: %w", p.ID, err)
		}
		out = j
		tx.keep(j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobRetryCopy inserts the corrected copy of a finished job (same
// queue, kind, metadata, tags, priority, attempt budget, schema version
// and timeout; the new payload; retry_of the original) and marks the
// original superseded by it, in one transaction. The original must be in a
// terminal state: a copy of a job that may still run would run twice.
func (s *Store) JobRetryCopy(ctx context.Context, p *backend.JobRetryCopyParams) (*sluicetype.Job, error) {
	st, err := s.stmts(ctx, sqlActionRead, sqlIsQuarantined, sqlInsertRetryCopy, sqlSupersede, sqlInsertEvent, sqlGetJob)
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
			return &sluicetype.StateError{Action: "retry with input", ID: p.ID, State: r.state, Allowed: sluicetype.TerminalStates()}
		}
		if p.Fingerprint != "" {
			var q bool
			if err := tx.StmtContext(ctx, st[1]).QueryRowContext(ctx, p.Fingerprint).Scan(&q); err != nil {
				return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
			}
			if q {
				return &sluicetype.QuarantinedError{Verb: "retry with input", ID: p.ID, Fingerprint: p.Fingerprint}
			}
		}
		nowNs := now.UnixNano()
		res, err := tx.StmtContext(ctx, st[2]).ExecContext(ctx, p.ID, p.NewID, string(p.Payload), p.Fingerprint, nowNs)
		if isUniqueHeld(err) {
			return uniqueHeldBy(ctx, tx, sqlCopyHolderOf, "retry with input", p.ID)
		}
		if err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
		} else if n == 0 {
			return fmt.Errorf("retry job %s with input: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
		}
		if _, err := tx.StmtContext(ctx, st[3]).ExecContext(ctx, p.ID, p.NewID); err != nil {
			return fmt.Errorf("sqlite: retry job %s with input: %w", p.ID, err)
		}
		out, err = s.finishCopy(ctx, tx, st[4], st[5], "retry job "+p.ID+" with input", r, p.ID, p.NewID, p.OriginalEvent, p.CopyEvent, nowNs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// finishCopy ends the transaction of a job copied into a new one (retry
// with input, replay from a step): an event on the original and one on the
// copy, the copy read back and counted available.
func (s *Store) finishCopy(ctx context.Context, tx *wtx, event, get *sql.Stmt, what string, r *actionRow,
	id, newID string, orig, cp backend.EventWrite, nowNs int64) (*sluicetype.Job, error) {
	ev := tx.StmtContext(ctx, event)
	if _, err := ev.ExecContext(ctx, id, string(orig.Kind), nowNs, orig.Actor,
		string(r.state), string(r.state), r.attempt, orig.Message); err != nil {
		return nil, fmt.Errorf("sqlite: %s: event: %w", what, err)
	}
	if _, err := ev.ExecContext(ctx, newID, string(cp.Kind), nowNs, cp.Actor,
		"", string(cp.To), 0, cp.Message); err != nil {
		return nil, fmt.Errorf("sqlite: %s: event: %w", what, err)
	}
	j, err := scanJob(tx.StmtContext(ctx, get).QueryRowContext(ctx, newID))
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	counts := countDeltas{}
	counts.move(j.Queue, "", sluicetype.StateAvailable, 1)
	tx.keep(j)
	return j, s.applyCounts(ctx, tx, counts)
}
