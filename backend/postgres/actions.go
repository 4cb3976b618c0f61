package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Operator actions on one job, applied from the engine's specs.

// specSet is the SET clause of an action spec: its state and effects, with
// $1 the store's now and, when the spec gives one more attempt, $2 a new
// deadline or NULL. States and reasons are literals the engine's spec
// names (never user text), so each spec is one statement text.
func specSet(spec backend.ActionSpec) string {
	var b strings.Builder
	b.WriteString("state = " + literal(string(spec.To)))
	if spec.Has(backend.EffectOneMoreAttempt) {
		b.WriteString(", max_attempts = greatest(max_attempts, attempt + 1)")
	}
	if spec.Has(backend.EffectResetCrashes) {
		b.WriteString(", crash_attempt = 0")
	}
	if spec.Has(backend.EffectScheduleNow) {
		b.WriteString(", scheduled_at = $1")
	}
	switch {
	case spec.Has(backend.EffectFinalize):
		b.WriteString(", finalized_at = $1, terminal_reason = " + literal(string(spec.Reason)))
	case spec.Has(backend.EffectReopen):
		b.WriteString(", finalized_at = NULL, terminal_reason = ''")
	}
	if spec.Has(backend.EffectClearLease) {
		b.WriteString(", lease_id = NULL, lease_worker = NULL, lease_expires_at = NULL")
	}
	b.WriteString(", state_changed_at = $1, version = version + 1")
	if spec.Has(backend.EffectOneMoreAttempt) {
		b.WriteString(", deadline = CASE WHEN $2::bigint IS NOT NULL THEN $2::bigint WHEN deadline <= $1 THEN NULL ELSE deadline END")
	}
	return b.String()
}

// setArgs are the leading arguments of a statement that starts with
// specSet: now, and the deadline when the set names one.
func setArgs(spec backend.ActionSpec, nowNs int64, deadline *int64) []any {
	if spec.Has(backend.EffectOneMoreAttempt) {
		return []any{nowNs, deadline}
	}
	return []any{nowNs}
}

// argBase is the number of the first argument after setArgs.
func argBase(spec backend.ActionSpec) int {
	if spec.Has(backend.EffectOneMoreAttempt) {
		return 3
	}
	return 2
}

// literal quotes a word (a state, a reason) as an SQL string.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

const (
	sqlActionRead = `SELECT state, queue, attempt, fingerprint, superseded_by, version FROM {s}.jobs WHERE id = $1 FOR UPDATE`
	// $1 id, $2 payload, $3 fingerprint.
	sqlUpdatePayload = `UPDATE {s}.jobs SET payload = $2, fingerprint = $3, version = version + 1
		WHERE id = $1 RETURNING ` + jobColumns
	// $1 original id, $2 new id, $3 payload, $4 fingerprint, $5 now.
	// The copy carries the original's unique key: the index refuses it
	// while a job holds the key, and it holds the key otherwise.
	sqlInsertRetryCopy = `INSERT INTO {s}.jobs (id, queue, kind, payload, schema_version, metadata, tags, priority,
		state, max_attempts, fingerprint, scheduled_at, timeout_ns, created_at, state_changed_at, retry_of,
		unique_key, unique_states)
	SELECT $2, queue, kind, $3, schema_version, metadata, tags, priority,
		'available', max_attempts, $4, $5, timeout_ns, $5, $5, id, unique_key, unique_states
	FROM {s}.jobs WHERE id = $1
	ON CONFLICT (id) DO NOTHING`
	// $1 id, $2 the copy's id.
	sqlSupersede = `UPDATE {s}.jobs SET superseded_by = $2, version = version + 1 WHERE id = $1`
)

// actionRow is what an action reads (and locks) of a job before it
// changes it.
type actionRow struct {
	state        sluicetype.State
	queue        string
	attempt      int32
	fingerprint  string
	supersededBy string
	version      int64
}

func readActionRow(ctx context.Context, tx *wtx, id string) (*actionRow, error) {
	var r actionRow
	var state string
	err := tx.QueryRow(ctx, tx.q(sqlActionRead), id).Scan(&state, &r.queue, &r.attempt, &r.fingerprint, &r.supersededBy, &r.version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, sluicetype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: read job %s: %w", id, err)
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
	var out *sluicetype.Job
	err := s.writeTx(ctx, func(tx *wtx) error {
		out = nil
		r, err := readActionRow(ctx, tx, p.ID)
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
			if err := tx.QueryRow(ctx, tx.q(sqlIsQuarantined), r.fingerprint).Scan(&q); err != nil {
				return fmt.Errorf("postgres: %s job %s: %w", spec.Action, p.ID, err)
			}
			if q {
				return &sluicetype.QuarantinedError{Verb: string(spec.Action), ID: p.ID, Fingerprint: r.fingerprint}
			}
		}
		if spec.Event != "" {
			// Before a delete: the event goes with the job.
			if _, err := tx.Exec(ctx, tx.q(sqlInsertEvent), p.ID, string(p.Event.Kind), tx.nowNs, p.Event.Actor,
				string(r.state), string(p.Event.To), r.attempt, p.Event.Message); err != nil {
				return fmt.Errorf("postgres: %s job %s: event: %w", spec.Action, p.ID, err)
			}
		}
		if spec.Has(backend.EffectDelete) {
			if _, err := tx.Exec(ctx, tx.q(`DELETE FROM {s}.jobs WHERE id = $1`), p.ID); err != nil {
				return fmt.Errorf("postgres: %s job %s: %w", spec.Action, p.ID, err)
			}
		} else {
			// A move into a state that holds the job's unique key is
			// refused while another job holds it. The index decides
			// (jobs_unique_key); reading the holder first only names it
			// without aborting the transaction.
			if held, err := uniqueHolderOf(ctx, tx, tx.q(sqlUniqueHolderOf), string(spec.Action), p.ID, spec.To); err != nil || held != nil {
				return cmp.Or[error](err, held)
			}
			q := tx.q(`UPDATE {s}.jobs SET ` + specSet(*spec) + fmt.Sprintf(` WHERE id = $%d RETURNING `, argBase(*spec)) + jobColumnsNoPayload)
			args := append(setArgs(*spec, tx.nowNs, nanosPtr(p.Deadline)), p.ID)
			j, err := scanJob(tx.QueryRow(ctx, q, args...))
			if err != nil {
				return fmt.Errorf("postgres: %s job %s: %w", spec.Action, p.ID, err)
			}
			out = j
		}
		counts := countDeltas{}
		counts.move(r.queue, r.state, spec.To, 1)
		if out != nil {
			tx.keep(out)
		}
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		if spec.To == sluicetype.StateAvailable {
			return s.notifyQueues(ctx, tx, map[string]bool{r.queue: true})
		}
		return nil
	})
	if isUniqueHeld(err) {
		// Another session's job took the key between the read and the
		// update: the index refused the update; name the holder.
		if held, herr := uniqueHolderOf(ctx, s.pool, s.sql(sqlUniqueHolderOf), string(spec.Action), p.ID, spec.To); herr == nil && held != nil {
			return nil, held
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// JobUpdatePayload replaces the payload and fingerprint of a job that is
// not running, if its version is still p.Version.
func (s *Store) JobUpdatePayload(ctx context.Context, p *backend.JobUpdatePayloadParams) (*sluicetype.Job, error) {
	var out *sluicetype.Job
	err := s.writeTx(ctx, func(tx *wtx) error {
		r, err := readActionRow(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if r.state == sluicetype.StateRunning {
			return backend.PayloadNotEditable(p.ID, r.state)
		}
		if r.version != p.Version {
			return &sluicetype.VersionError{ID: p.ID, Have: r.version, Want: p.Version}
		}
		j, err := scanJob(tx.QueryRow(ctx, tx.q(sqlUpdatePayload), p.ID, string(p.Payload), p.Fingerprint))
		if err != nil {
			return fmt.Errorf("postgres: edit payload of job %s: %w", p.ID, err)
		}
		if _, err := tx.Exec(ctx, tx.q(sqlInsertEvent), p.ID, string(p.Event.Kind), tx.nowNs,
			p.Event.Actor, string(r.state), string(r.state), r.attempt, p.Event.Message); err != nil {
			return fmt.Errorf("postgres: edit payload of job %s: event: %w", p.ID, err)
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

// JobRetryCopy inserts the corrected copy of a finished job and
// marks the original superseded by it, in one transaction.
func (s *Store) JobRetryCopy(ctx context.Context, p *backend.JobRetryCopyParams) (*sluicetype.Job, error) {
	var out *sluicetype.Job
	err := s.writeTx(ctx, func(tx *wtx) error {
		r, err := readActionRow(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if !r.state.Terminal() {
			return &sluicetype.StateError{Action: "retry with input", ID: p.ID, State: r.state, Allowed: sluicetype.TerminalStates()}
		}
		if p.Fingerprint != "" {
			var q bool
			if err := tx.QueryRow(ctx, tx.q(sqlIsQuarantined), p.Fingerprint).Scan(&q); err != nil {
				return fmt.Errorf("postgres: retry job %s with input: %w", p.ID, err)
			}
			if q {
				return &sluicetype.QuarantinedError{Verb: "retry with input", ID: p.ID, Fingerprint: p.Fingerprint}
			}
		}
		// Named before the insert, which the index would abort.
		if held, err := uniqueHolderOf(ctx, tx, tx.q(sqlCopyHolderOf), "retry with input", p.ID, sluicetype.StateAvailable); err != nil || held != nil {
			return cmp.Or[error](err, held)
		}
		tag, err := tx.Exec(ctx, tx.q(sqlInsertRetryCopy), p.ID, p.NewID, string(p.Payload), p.Fingerprint, tx.nowNs)
		if err != nil {
			return fmt.Errorf("postgres: retry job %s with input: %w", p.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("retry job %s with input: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
		}
		if _, err := tx.Exec(ctx, tx.q(sqlSupersede), p.ID, p.NewID); err != nil {
			return fmt.Errorf("postgres: retry job %s with input: %w", p.ID, err)
		}
		out, err = s.finishCopy(ctx, tx, "retry job "+p.ID+" with input", r, p.ID, p.NewID, p.OriginalEvent, p.CopyEvent)
		return err
	})
	if err != nil {
		return nil, s.copyHeld(ctx, err, "retry with input", p.ID)
	}
	return out, nil
}

// finishCopy ends the transaction of a job copied into a new one (retry
// with input, replay from a step): an event on the original and one on the
// copy, the copy read back, counted available and its queue woken.
func (s *Store) finishCopy(ctx context.Context, tx *wtx, what string, r *actionRow,
	id, newID string, orig, cp backend.EventWrite) (*sluicetype.Job, error) {
	if _, err := tx.Exec(ctx, tx.q(sqlInsertEvent), id, string(orig.Kind), tx.nowNs, orig.Actor,
		string(r.state), string(r.state), r.attempt, orig.Message); err != nil {
		return nil, fmt.Errorf("postgres: %s: event: %w", what, err)
	}
	if _, err := tx.Exec(ctx, tx.q(sqlInsertEvent), newID, string(cp.Kind), tx.nowNs, cp.Actor,
		"", string(cp.To), 0, cp.Message); err != nil {
		return nil, fmt.Errorf("postgres: %s: event: %w", what, err)
	}
	j, err := scanJob(tx.QueryRow(ctx, tx.q(sqlGetJob), newID))
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	counts := countDeltas{}
	counts.move(j.Queue, "", sluicetype.StateAvailable, 1)
	tx.keep(j)
	if err := s.applyCounts(ctx, tx, counts); err != nil {
		return nil, err
	}
	return j, s.notifyQueues(ctx, tx, map[string]bool{j.Queue: true})
}

// copyHeld names the holder when the index refused a copy's key (another
// session's job took it between the read and the insert), else returns
// err.
func (s *Store) copyHeld(ctx context.Context, err error, verb, id string) error {
	if isUniqueHeld(err) {
		if held, herr := uniqueHolderOf(ctx, s.pool, s.sql(sqlCopyHolderOf), verb, id, sluicetype.StateAvailable); herr == nil && held != nil {
			return held
		}
	}
	return err
}
