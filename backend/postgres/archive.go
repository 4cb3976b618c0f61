package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The cold archive (migration 0002): terminal jobs of the queues named in
// Options.ArchiveQueues are copied into job_archive by the retention sweep
// (JobDeleteExpired) in the transaction that deletes them. job_archive is
// partitioned by the month of eviction; the sweep creates the current and
// the next month's partitions when they are missing, and drops a closed
// month whole once its end is older than Options.ArchiveRetention. The
// archive is for audit: ArchiveList and ArchiveGet read it; nothing
// redrives from it.

// ArchivedJob is a job as the sweep archived it.
type ArchivedJob = sluicetype.ArchivedJob

var _ backend.ArchiveStore = (*Store)(nil)

// archiveColumns are the job columns job_archive keeps (all but the lease
// and the checkpoint, which a terminal job has not).
const archiveColumns = `id, queue, kind, payload, schema_version, metadata, tags, priority, state, attempt,
	max_attempts, crash_attempt, fingerprint, fence, scheduled_at, deadline, timeout_ns, created_at, attempted_at,
	attempted_by, state_changed_at, finalized_at, terminal_reason, errors, version, dead_letter_of, retry_of,
	superseded_by, last_error, error_pattern`

// archiveReadColumns read job_archive rows as jobColumns.
const archiveReadColumns = `id, queue, kind, payload, schema_version, metadata, tags, priority, state, attempt,
	max_attempts, crash_attempt, fingerprint, fence, scheduled_at, deadline, timeout_ns, created_at, attempted_at,
	attempted_by, state_changed_at, finalized_at, terminal_reason, NULL::text, NULL::text, NULL::bigint, errors,
	version, NULL::jsonb, dead_letter_of, retry_of, superseded_by, ''::text`

// sqlDeleteExpiredArchiving is sqlDeleteExpired that also copies the
// deleted jobs of the queues in $7 into job_archive, evicted at $6.
const sqlDeleteExpiredArchiving = `WITH d AS (SELECT id FROM {s}.jobs
		WHERE state = $1 AND state NOT IN ('available', 'running') AND state_changed_at < $2 AND finalized_at < $2
		AND ($3::text IS NULL OR queue = $3) AND NOT (queue = ANY($4::text[]))
		ORDER BY state_changed_at, id LIMIT $5 FOR UPDATE SKIP LOCKED),
	gone AS (DELETE FROM {s}.jobs j USING d WHERE j.id = d.id RETURNING j.*),
	kept AS (INSERT INTO {s}.job_archive (evicted_at, ` + archiveColumns + `)
		SELECT $6, ` + archiveColumns + ` FROM gone WHERE queue = ANY($7::text[]))
	SELECT queue FROM gone`

// monthStart is the first instant of t's month (UTC).
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func partitionName(month time.Time) string { return "job_archive_" + month.Format("200601") }

// ensurePartitions creates the partitions of the month of at and of the
// next month when they are missing.
func (s *Store) ensurePartitions(ctx context.Context, tx *wtx, at time.Time) error {
	for _, m := range []time.Time{monthStart(at), monthStart(at).AddDate(0, 1, 0)} {
		name := partitionName(m)
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{s.schema, name}.Sanitize()).Scan(&exists); err != nil {
			return fmt.Errorf("postgres: archive partition %s: %w", name, err)
		}
		if exists {
			continue
		}
		// Two sweeps (a leader handing over) must not race on the DDL.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sluice-archive:' || $1))`, s.schema); err != nil {
			return fmt.Errorf("postgres: archive partition %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM (%d) TO (%d)`,
			pgx.Identifier{s.schema, name}.Sanitize(), pgx.Identifier{s.schema, "job_archive"}.Sanitize(),
			m.UnixNano(), m.AddDate(0, 1, 0).UnixNano())); err != nil {
			return fmt.Errorf("postgres: archive partition %s: %w", name, err)
		}
		s.log.Info("postgres: archive partition created", "store", s.url, "partition", name)
	}
	return nil
}

// dropClosedPartitions drops the partitions whose month ended more than
// retention before at, and returns their names.
func (s *Store) dropClosedPartitions(ctx context.Context, tx *wtx, at time.Time, retention time.Duration) ([]string, error) {
	if retention <= 0 {
		return nil, nil
	}
	names, err := queryStrings(ctx, tx, `SELECT c.relname::text FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
		JOIN pg_namespace n ON n.oid = p.relnamespace
		WHERE n.nspname = $1 AND p.relname = 'job_archive' ORDER BY 1`, s.schema)
	if err != nil {
		return nil, fmt.Errorf("postgres: archive partitions: %w", err)
	}
	var dropped []string
	for _, name := range names {
		m, err := time.Parse("200601", strings.TrimPrefix(name, "job_archive_"))
		if err != nil {
			continue // not one of ours
		}
		if end := m.AddDate(0, 1, 0); !end.Add(retention).Before(at) {
			continue
		}
		if _, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{s.schema, name}.Sanitize()); err != nil {
			return nil, fmt.Errorf("postgres: drop archive partition %s: %w", name, err)
		}
		s.log.Info("postgres: archive partition dropped", "store", s.url, "partition", name)
		dropped = append(dropped, name)
	}
	return dropped, nil
}

// archives reports whether the store archives any queue.
func (s *Store) archives() bool { return len(s.archiveQueues) > 0 }

// ArchiveListParams pages the archive newest eviction first.
type ArchiveListParams = backend.ArchiveListParams

// ArchiveList pages archived jobs, newest eviction first.
func (s *Store) ArchiveList(ctx context.Context, p *ArchiveListParams) ([]ArchivedJob, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.DefaultListLimit
	}
	w := s.newWhere(nil)
	if p.Queue != "" {
		w.add("queue = " + w.a.add(p.Queue))
	}
	if p.Kind != "" {
		w.add("kind = " + w.a.add(p.Kind))
	}
	if p.After != nil {
		w.add("(evicted_at, id) < (" + w.a.add(p.After.At.UnixNano()) + ", " + w.a.add(p.After.ID) + "::text)")
	}
	q := s.sql(`SELECT evicted_at, `+archiveReadColumns+` FROM {s}.job_archive WHERE `) + w.sql() +
		" ORDER BY evicted_at DESC, id DESC LIMIT " + w.a.add(limit)
	rows, err := s.pool.Query(ctx, q, w.a.vals...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list archive: %w", err)
	}
	return collectArchived(rows)
}

// ArchiveGet returns the archived copies of one job id (a job re-created
// under the same id may be archived again), newest first; ErrNotFound
// when there is none.
func (s *Store) ArchiveGet(ctx context.Context, id string) ([]ArchivedJob, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT evicted_at, `+archiveReadColumns+` FROM {s}.job_archive
		WHERE id = $1 ORDER BY evicted_at DESC`), id)
	if err != nil {
		return nil, fmt.Errorf("postgres: archived job %s: %w", id, err)
	}
	out, err := collectArchived(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: archived job %s: %w", id, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("archived job %s: %w", id, sluicetype.ErrNotFound)
	}
	return out, nil
}

func collectArchived(rows pgx.Rows) ([]ArchivedJob, error) {
	defer rows.Close()
	var out []ArchivedJob
	for rows.Next() {
		var r jobRow
		var at int64
		if err := rows.Scan(append([]any{&at}, r.dest()...)...); err != nil {
			return nil, err
		}
		j, err := r.job()
		if err != nil {
			return nil, err
		}
		out = append(out, ArchivedJob{Job: j, EvictedAt: fromNanos(at)})
	}
	return out, rows.Err()
}

// archiveQueueList is the sorted queue list of the option.
func archiveQueueList(qs []string) []string {
	out := slices.Clone(qs)
	slices.Sort(out)
	return slices.Compact(out)
}
