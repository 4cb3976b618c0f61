package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Inserting jobs, and the statements every area shares.

const defaultLease = 30 * time.Second

const (
	sqlAnyQuarantined = `SELECT EXISTS(SELECT 1 FROM fingerprints WHERE status = 'quarantined')`
	sqlIsQuarantined  = `SELECT EXISTS(SELECT 1 FROM fingerprints WHERE fingerprint = ? AND status = 'quarantined')`
	sqlInsertJob      = `INSERT INTO jobs (id, queue, kind, payload, schema_version, metadata, tags, priority, state,
		max_attempts, fingerprint, scheduled_at, deadline, timeout_ns, created_at, state_changed_at,
		checkpoint, dead_letter_of, retry_of, unique_key, unique_states)
	VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15, NULL, '', '', ?16, ?17)
	ON CONFLICT DO NOTHING`
	sqlGetJob          = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?`
	sqlGetJobNoPayload = `SELECT ` + jobColumnsNoPayload + ` FROM jobs WHERE id = ?`
	sqlInsertEvent     = `INSERT INTO job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
)

// JobInsertMany writes new jobs in one transaction; each is accepted or
// refused on its own.
func (s *Store) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) ([]backend.JobInsertResult, error) {
	res := make([]backend.JobInsertResult, len(p.Jobs))
	if len(p.Jobs) == 0 {
		return res, nil
	}
	st, err := s.stmts(ctx, sqlAnyQuarantined, sqlIsQuarantined, sqlInsertJob, sqlGetJobNoPayload, sqlUniqueHolder)
	if err != nil {
		return nil, err
	}
	err = s.writeTx(ctx, func(tx *wtx, now time.Time) error {
		for i := range res {
			res[i] = backend.JobInsertResult{}
		}
		var anyQuarantined bool
		if err := tx.StmtContext(ctx, st[0]).QueryRowContext(ctx).Scan(&anyQuarantined); err != nil {
			return fmt.Errorf("sqlite: insert jobs: %w", err)
		}
		var isQ *sql.Stmt
		if anyQuarantined && p.RefuseQuarantined {
			isQ = tx.StmtContext(ctx, st[1])
		}
		ins := tx.StmtContext(ctx, st[2])
		var get *sql.Stmt
		nowNs := now.UnixNano()
		counts := countDeltas{}
		for i, jp := range p.Jobs {
			if jp == nil || jp.ID == "" {
				res[i].Err = fmt.Errorf("sqlite: insert job: %w: no id", sluicetype.ErrInvalid)
				continue
			}
			if isQ != nil && jp.Fingerprint != "" {
				var q bool
				if err := isQ.QueryRowContext(ctx, jp.Fingerprint).Scan(&q); err != nil {
					return fmt.Errorf("sqlite: insert job %s: %w", jp.ID, err)
				}
				if q {
					res[i].Err = &sluicetype.QuarantinedError{Verb: "insert", ID: jp.ID, Fingerprint: jp.Fingerprint}
					continue
				}
			}
			due := now.Add(jp.Delay)
			if jp.ScheduledAt != nil {
				due = jp.ScheduledAt.UTC()
			}
			state := sluicetype.StateAvailable
			if due.After(now) {
				state = sluicetype.StateScheduled
			}
			tags := "[]"
			if len(jp.Tags) > 0 {
				tags = jsonStrings(jp.Tags)
			}
			r, err := ins.ExecContext(ctx,
				jp.ID, jp.Queue, jp.Kind, string(jp.Payload), jp.SchemaVersion,
				textOrNull(jp.Metadata), tags, jp.Priority, string(state),
				jp.MaxAttempts, jp.Fingerprint, due.UnixNano(), nanosPtr(jp.Deadline),
				int64(jp.Timeout), nowNs, jp.UniqueKey, jp.UniqueStates)
			if err != nil {
				return fmt.Errorf("sqlite: insert job %s: %w", jp.ID, err)
			}
			if n, err := r.RowsAffected(); err != nil {
				return fmt.Errorf("sqlite: insert job %s: %w", jp.ID, err)
			} else if n == 1 {
				counts.move(jp.Queue, "", state, 1)
				j := &sluicetype.Job{
					ID:             jp.ID,
					Queue:          jp.Queue,
					Kind:           jp.Kind,
					SchemaVersion:  jp.SchemaVersion,
					Metadata:       cloneRaw(jp.Metadata),
					Priority:       jp.Priority,
					State:          state,
					MaxAttempts:    jp.MaxAttempts,
					Fingerprint:    jp.Fingerprint,
					ScheduledAt:    fromNanos(due.UnixNano()),
					Timeout:        jp.Timeout,
					CreatedAt:      now,
					StateChangedAt: now,
					Version:        1,
					UniqueKey:      jp.UniqueKey,
				}
				if len(jp.Tags) > 0 {
					j.Tags = append([]string(nil), jp.Tags...)
				}
				if jp.Deadline != nil {
					d := fromNanos(jp.Deadline.UnixNano())
					j.Deadline = &d
				}
				res[i].Job = j
				continue
			}
			// The id exists: the same job again, or a conflict.
			if get == nil {
				get = tx.StmtContext(ctx, st[3])
			}
			old, err := scanJob(get.QueryRowContext(ctx, jp.ID))
			if errors.Is(err, sql.ErrNoRows) && jp.UniqueKey != "" {
				// No such id: the unique key is held.
				holder, err := scanJob(tx.StmtContext(ctx, st[4]).QueryRowContext(ctx, jp.UniqueKey))
				if err != nil {
					return fmt.Errorf("sqlite: insert job %s: unique key %s: %w", jp.ID, jp.UniqueKey, err)
				}
				res[i].Job = holder
				res[i].Existing = true
				continue
			}
			if err != nil {
				return fmt.Errorf("sqlite: insert job %s: %w", jp.ID, err)
			}
			if old.Queue != jp.Queue || old.Kind != jp.Kind || old.Fingerprint != jp.Fingerprint {
				res[i].Err = &sluicetype.IDTakenError{ID: jp.ID}
				continue
			}
			res[i].Job = old
			res[i].Existing = true
		}
		tx.keep(res)
		return s.applyCounts(ctx, tx, counts)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// sqlUniqueHolds is true of a row that holds its unique key: its state's
// bit (sluicetype.UniqueStateBit) is set in its unique_states. It is
// written as the expression of jobs_unique_key (migration 0009) equal to
// the empty string, the holders' value there, so that SQLite finds a key's holder in
// that index.
var sqlUniqueHolds = uniqueHoldsSQL("")

// uniqueHoldsSQL spells sqlUniqueHolds for a table alias ("" for none).
func uniqueHoldsSQL(alias string) string {
	if alias != "" {
		alias += "."
	}
	var b strings.Builder
	b.WriteString("(" + alias + "unique_key <> '' AND (CASE WHEN (" + alias + "unique_states & (CASE " + alias + "state")
	for _, st := range sluicetype.AllStates {
		fmt.Fprintf(&b, " WHEN '%s' THEN %d", st, sluicetype.UniqueStateBit(st))
	}
	b.WriteString(" ELSE 0 END)) <> 0 THEN '' ELSE " + alias + "id END) = '')")
	return b.String()
}

// sqlUniqueHolder finds the job holding a unique key (jobs_unique_key
// admits at most one).
var sqlUniqueHolder = `SELECT ` + jobColumnsNoPayload + ` FROM jobs WHERE unique_key = ?1 AND ` + sqlUniqueHolds

// sqlUniqueHolderOf finds, for job ?1, the other job holding its unique
// key: its key and the holder's id.
var sqlUniqueHolderOf = `SELECT j.unique_key, h.id FROM jobs j JOIN jobs h ON h.unique_key = j.unique_key AND h.id <> j.id
	WHERE j.id = ?1 AND j.unique_key <> '' AND ` + uniqueHoldsSQL("h") + ` LIMIT 1`

// sqlCopyHolderOf finds, for job ?1, the job holding its unique key, ?1
// itself among them: a copy of ?1 (retry with input, replay) takes the
// key while none holds it.
var sqlCopyHolderOf = `SELECT j.unique_key, h.id FROM jobs j JOIN jobs h ON h.unique_key = j.unique_key
	WHERE j.id = ?1 AND j.unique_key <> '' AND ` + uniqueHoldsSQL("h") + ` LIMIT 1`

// isUniqueHeld reports an error of the index jobs_unique_key (SQLite
// names an index on an expression by its name): a write
// would have made a second job hold a unique key.
func isUniqueHeld(err error) bool {
	var se interface{ Code() int }
	return err != nil && errors.As(err, &se) && se.Code() == sqliteConstraintUnique &&
		strings.Contains(err.Error(), "jobs_unique_key")
}

// sqliteConstraintUnique is SQLITE_CONSTRAINT_UNIQUE.
const sqliteConstraintUnique = 2067

// uniqueHeld builds the refusal of a write to job id that the unique
// index stopped, naming the job that holds the key (read in tx: SQLite
// aborted the statement, not the transaction).
func uniqueHeld(ctx context.Context, tx *wtx, verb, id string) error {
	return uniqueHeldBy(ctx, tx, sqlUniqueHolderOf, verb, id)
}

// uniqueHeldBy is uniqueHeld with the holder's query: sqlUniqueHolderOf
// for a move of job id, sqlCopyHolderOf for a copy of it.
func uniqueHeldBy(ctx context.Context, tx *wtx, query, verb, id string) error {
	var key, holder string
	if err := tx.QueryRowContext(ctx, query, id).Scan(&key, &holder); err != nil {
		return fmt.Errorf("sqlite: %s job %s: the unique key is held, and its holder: %w", verb, id, err)
	}
	return &sluicetype.UniqueHeldError{Verb: verb, ID: id, Key: key, HolderID: holder}
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}
