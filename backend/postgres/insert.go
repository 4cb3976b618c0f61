package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Inserting jobs, reading them, and the statements several areas share.

const defaultLease = 30 * time.Second

const (
	// The new jobs as arrays, one element per job: $1 id, $2 queue, $3
	// kind, $4 payload, $5 schema version, $6 metadata, $7 tags (each a
	// JSON array), $8 priority, $9 state, $10 max attempts, $11
	// fingerprint, $12 scheduled_at, $13 deadline, $14 timeout; $15 now.
	sqlInsertJobs = `INSERT INTO {s}.jobs (id, queue, kind, payload, schema_version, metadata, tags, priority, state,
		max_attempts, fingerprint, scheduled_at, deadline, timeout_ns, created_at, state_changed_at)
	SELECT id, queue, kind, payload, sv, meta, ARRAY(SELECT jsonb_array_elements_text(tags)), prio, state,
		ma, fp, sched, dl, tmo, $15, $15
	FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::int[], $6::jsonb[], $7::jsonb[], $8::int[],
		$9::text[], $10::int[], $11::text[], $12::bigint[], $13::bigint[], $14::bigint[])
		AS j(id, queue, kind, payload, sv, meta, tags, prio, state, ma, fp, sched, dl, tmo)
	ON CONFLICT (id) DO NOTHING
	RETURNING id`
	sqlQuarantinedOf = `SELECT fingerprint FROM {s}.fingerprints WHERE status = 'quarantined' AND fingerprint = ANY($1::text[])`
	sqlIsQuarantined = `SELECT EXISTS(SELECT 1 FROM {s}.fingerprints WHERE fingerprint = $1 AND status = 'quarantined')`
	sqlGetJob        = `SELECT ` + jobColumns + ` FROM {s}.jobs WHERE id = $1`
	sqlGetJobNoPay   = `SELECT ` + jobColumnsNoPayload + ` FROM {s}.jobs WHERE id = $1`
	sqlInsertEvent   = `INSERT INTO {s}.job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	sqlNotify = `SELECT pg_notify($1, $2)`
)

// JobInsertMany writes new jobs in one transaction; each is accepted or
// refused on its own. New available jobs send one notification for the
// batch (on commit).
func (s *Store) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) ([]backend.JobInsertResult, error) {
	res := make([]backend.JobInsertResult, len(p.Jobs))
	if len(p.Jobs) == 0 {
		return res, nil
	}
	var avail []*sluicetype.Job // new available jobs, to check against the claim cursors
	err := s.writeTx(ctx, func(tx *wtx) error {
		tx.cursorsKept = true
		avail = avail[:0]
		for i := range res {
			res[i] = backend.JobInsertResult{}
		}
		quarantined := map[string]bool{}
		if p.RefuseQuarantined {
			fps := make([]string, 0, len(p.Jobs))
			for _, jp := range p.Jobs {
				if jp != nil && jp.Fingerprint != "" {
					fps = append(fps, jp.Fingerprint)
				}
			}
			if len(fps) > 0 {
				qs, err := queryStrings(ctx, tx, tx.q(sqlQuarantinedOf), fps)
				if err != nil {
					return fmt.Errorf("postgres: insert jobs: %w", err)
				}
				for _, fp := range qs {
					quarantined[fp] = true
				}
			}
		}
		n := len(p.Jobs)
		var (
			ids, queues, kinds, states, fps = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
			payloads, metas, tags           = make([]*string, 0, n), make([]*string, 0, n), make([]string, 0, n)
			svs, prios, mas                 = make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n)
			scheds, tmos                    = make([]int64, 0, n), make([]int64, 0, n)
			dls                             = make([]*int64, 0, n)
			idx                             = make([]int, 0, n)
		)
		for i, jp := range p.Jobs {
			if jp == nil || jp.ID == "" {
				res[i].Err = fmt.Errorf("postgres: insert job: %w: no id", sluicetype.ErrInvalid)
				continue
			}
			if quarantined[jp.Fingerprint] {
				res[i].Err = &sluicetype.QuarantinedError{Verb: "insert", ID: jp.ID, Fingerprint: jp.Fingerprint}
				continue
			}
			due := tx.now.Add(jp.Delay)
			if jp.ScheduledAt != nil {
				due = jp.ScheduledAt.UTC()
			}
			state := sluicetype.StateAvailable
			if due.After(tx.now) {
				state = sluicetype.StateScheduled
			}
			tg, err := json.Marshal(jp.Tags)
			if err != nil || len(jp.Tags) == 0 {
				tg = []byte("[]")
			}
			ids, queues, kinds, states, fps = append(ids, jp.ID), append(queues, jp.Queue), append(kinds, jp.Kind), append(states, string(state)), append(fps, jp.Fingerprint)
			payloads, metas, tags = append(payloads, strPtr(jp.Payload)), append(metas, strPtr(jp.Metadata)), append(tags, string(tg))
			svs, prios, mas = append(svs, int32(jp.SchemaVersion)), append(prios, int32(jp.Priority)), append(mas, int32(jp.MaxAttempts))
			scheds, tmos, dls = append(scheds, due.UnixNano()), append(tmos, int64(jp.Timeout)), append(dls, nanosPtr(jp.Deadline))
			idx = append(idx, i)
			res[i].Job = &sluicetype.Job{
				ID: jp.ID, Queue: jp.Queue, Kind: jp.Kind, SchemaVersion: jp.SchemaVersion,
				Metadata: cloneRaw(jp.Metadata), Priority: jp.Priority, State: state,
				MaxAttempts: jp.MaxAttempts, Fingerprint: jp.Fingerprint, ScheduledAt: due,
				Timeout: jp.Timeout, CreatedAt: tx.now, StateChangedAt: tx.now, Version: 1,
				Deadline: timePtr(nanosPtr(jp.Deadline)),
			}
			if len(jp.Tags) > 0 {
				res[i].Job.Tags = slices.Clone(jp.Tags)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		inserted, err := queryStrings(ctx, tx, tx.q(sqlInsertJobs), ids, queues, kinds, payloads, svs, metas, tags, prios,
			states, mas, fps, scheds, dls, tmos, tx.nowNs)
		if err != nil {
			return fmt.Errorf("postgres: insert jobs: %w", err)
		}
		fresh := make(map[string]bool, len(inserted))
		for _, id := range inserted {
			fresh[id] = true
		}
		counts := countDeltas{}
		wake := map[string]bool{}
		for _, i := range idx {
			jp, j := p.Jobs[i], res[i].Job
			if fresh[jp.ID] {
				delete(fresh, jp.ID) // a second item of the same id is not new
				counts.move(jp.Queue, "", j.State, 1)
				if j.State == sluicetype.StateAvailable {
					wake[jp.Queue] = true
					avail = append(avail, j)
				}
				continue
			}
			// The id exists: the same job again, or a conflict.
			res[i].Job = nil
			old, err := scanJob(tx.QueryRow(ctx, tx.q(sqlGetJobNoPay), jp.ID))
			if err != nil {
				return fmt.Errorf("postgres: insert job %s: %w", jp.ID, err)
			}
			if old.Queue != jp.Queue || old.Kind != jp.Kind || old.Fingerprint != jp.Fingerprint {
				res[i].Err = &sluicetype.IDTakenError{ID: jp.ID}
				continue
			}
			res[i].Job = old
			res[i].Existing = true
		}
		tx.keep(res)
		if err := s.applyCounts(ctx, tx, counts); err != nil {
			return err
		}
		return s.notifyQueues(ctx, tx, wake)
	})
	if err != nil {
		return nil, err
	}
	for _, j := range avail {
		s.cursorBack(j.Queue, orderKey{int32(j.Priority), j.ScheduledAt.UnixNano()})
	}
	return res, nil
}

// notifyQueues sends one notification naming the queues that got work;
// it is delivered when the transaction commits.
func (s *Store) notifyQueues(ctx context.Context, q querier, queues map[string]bool) error {
	if len(queues) == 0 || s.noNotify {
		return nil
	}
	names := make([]string, 0, len(queues))
	for name := range queues {
		names = append(names, name)
	}
	sort.Strings(names)
	payload := strings.Join(names, "\n")
	if len(payload) > 7000 {
		payload = "" // too long for a notification: wake every queue
	}
	if _, err := q.Exec(ctx, sqlNotify, s.channel(), payload); err != nil {
		return fmt.Errorf("postgres: notify: %w", err)
	}
	return nil
}

func strPtr(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// queryStrings runs a query of one text column and collects it.
func queryStrings(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
