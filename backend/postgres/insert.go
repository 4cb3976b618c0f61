package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Inserting jobs, reading them, and the statements several areas share.

const defaultLease = 30 * time.Second

const (
	// The new jobs as arrays, one element per job: $1 id, $2 queue, $3
	// kind, $4 payload, $5 schema version, $6 metadata, $7 tags (each a
	// JSON array), $8 priority, $9 state, $10 max attempts, $11
	// fingerprint, $12 scheduled_at, $13 deadline, $14 timeout, $16
	// unique key, $17 unique states; $15 now. A job whose id exists, or
	// whose unique key another job holds (jobs_unique_key, migration
	// 0011), is not written: DO NOTHING names no conflict target so that
	// it covers both.
	sqlInsertJobs = `INSERT INTO {s}.jobs (id, queue, kind, payload, schema_version, metadata, tags, priority, state,
		max_attempts, fingerprint, scheduled_at, deadline, timeout_ns, created_at, state_changed_at, unique_key, unique_states)
	SELECT id, queue, kind, payload, sv, meta, ARRAY(SELECT jsonb_array_elements_text(tags)), prio, state,
		ma, fp, sched, dl, tmo, $15, $15, uk, us
	FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::int[], $6::jsonb[], $7::jsonb[], $8::int[],
		$9::text[], $10::int[], $11::text[], $12::bigint[], $13::bigint[], $14::bigint[], $16::text[], $17::int[])
		AS j(id, queue, kind, payload, sv, meta, tags, prio, state, ma, fp, sched, dl, tmo, uk, us)
	ON CONFLICT DO NOTHING
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
			uks                             = make([]string, 0, n)
			uss                             = make([]int32, 0, n)
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
			uks, uss = append(uks, jp.UniqueKey), append(uss, int32(jp.UniqueStates))
			idx = append(idx, i)
			res[i].Job = &sluicetype.Job{
				ID: jp.ID, Queue: jp.Queue, Kind: jp.Kind, SchemaVersion: jp.SchemaVersion,
				Metadata: cloneRaw(jp.Metadata), Priority: jp.Priority, State: state,
				MaxAttempts: jp.MaxAttempts, Fingerprint: jp.Fingerprint, ScheduledAt: due,
				Timeout: jp.Timeout, CreatedAt: tx.now, StateChangedAt: tx.now, Version: 1,
				Deadline: timePtr(nanosPtr(jp.Deadline)), UniqueKey: jp.UniqueKey,
			}
			if len(jp.Tags) > 0 {
				res[i].Job.Tags = slices.Clone(jp.Tags)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		inserted, err := queryStrings(ctx, tx, tx.q(sqlInsertJobs), ids, queues, kinds, payloads, svs, metas, tags, prios,
			states, mas, fps, scheds, dls, tmos, tx.nowNs, uks, uss)
		if err != nil {
			return fmt.Errorf("postgres: insert jobs: %w", err)
		}
		fresh := make(map[string]bool, len(inserted))
		for _, id := range inserted {
			fresh[id] = true
		}
		counts := countDeltas{}
		wake := map[string]bool{}
		added := func(jp *backend.JobInsertParams, j *sluicetype.Job) {
			counts.move(jp.Queue, "", j.State, 1)
			if j.State == sluicetype.StateAvailable {
				wake[jp.Queue] = true
				avail = append(avail, j)
			}
		}
		var rest []int // the items not written: their id or unique key is taken
		for _, i := range idx {
			jp, j := p.Jobs[i], res[i].Job
			if fresh[jp.ID] {
				delete(fresh, jp.ID) // a second item of the same id is not new
				added(jp, j)
				continue
			}
			rest = append(rest, i)
		}
		// The jobs they met, read in two statements for the batch: by id
		// (the same job again, or a conflict), then by unique key for
		// the ids that do not exist (the key's holder).
		byID, byKey, err := s.insertMet(ctx, tx, p.Jobs, rest)
		if err != nil {
			return err
		}
		for _, i := range rest {
			jp, j := p.Jobs[i], res[i].Job
			res[i].Job = nil
			if old, ok := byID[jp.ID]; ok {
				if old.Queue != jp.Queue || old.Kind != jp.Kind || old.Fingerprint != jp.Fingerprint {
					res[i].Err = &sluicetype.IDTakenError{ID: jp.ID}
					continue
				}
				res[i].Job, res[i].Existing = old, true
				continue
			}
			if holder, ok := byKey[jp.UniqueKey]; ok && jp.UniqueKey != "" {
				res[i].Job, res[i].Existing = holder, true
				continue
			}
			if jp.UniqueKey == "" {
				return fmt.Errorf("postgres: insert job %s: not written, and no job has its id", jp.ID)
			}
			// The holder left its holding states since the insert (another
			// session's commit): settle this one alone.
			holder, inserted, err := s.insertUnique(ctx, tx, jp, j)
			if err != nil {
				return err
			}
			if inserted {
				res[i].Job = j
				added(jp, j)
				continue
			}
			res[i].Job, res[i].Existing = holder, true
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

// sqlJobsByID and sqlUniqueHolders read the jobs an insert met: by id,
// and the holders of unique keys.
var (
	sqlJobsByID      = `SELECT ` + jobColumnsNoPayload + ` FROM {s}.jobs WHERE id = ANY($1::text[])`
	sqlUniqueHolders = `SELECT ` + jobColumnsNoPayload + ` FROM {s}.jobs WHERE unique_key = ANY($1::text[]) AND ` + uniqueHoldsSQL("")
)

// insertMet reads, for the items rest of jobs that the insert did not
// write, the jobs of their ids and the holders of the unique keys of
// those whose id no job has.
func (s *Store) insertMet(ctx context.Context, tx *wtx, jobs []*backend.JobInsertParams, rest []int) (byID, byKey map[string]*sluicetype.Job, err error) {
	if len(rest) == 0 {
		return nil, nil, nil
	}
	ids := make([]string, len(rest))
	for k, i := range rest {
		ids[k] = jobs[i].ID
	}
	found, err := collectJobs(tx.Query(ctx, tx.q(sqlJobsByID), ids))
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: insert jobs: %w", err)
	}
	byID = make(map[string]*sluicetype.Job, len(found))
	for _, j := range found {
		byID[j.ID] = j
	}
	var keys []string
	for _, i := range rest {
		if jp := jobs[i]; byID[jp.ID] == nil && jp.UniqueKey != "" {
			keys = append(keys, jp.UniqueKey)
		}
	}
	if len(keys) == 0 {
		return byID, nil, nil
	}
	holders, err := collectJobs(tx.Query(ctx, tx.q(sqlUniqueHolders), keys))
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: insert jobs: unique keys: %w", err)
	}
	byKey = make(map[string]*sluicetype.Job, len(holders))
	for _, j := range holders {
		byKey[j.UniqueKey] = j
	}
	return byID, byKey, nil
}

// sqlUniqueHolder reads the job holding a unique key.
var sqlUniqueHolder = `SELECT ` + jobColumnsNoPayload + ` FROM {s}.jobs WHERE unique_key = $1 AND ` + uniqueHoldsSQL("")

// insertUnique settles a job the insert did not write although its id is
// free: another job held its unique key. It returns that job; or, when
// the holder left its holding states between the insert and the read
// (another session's commit), it inserts the job again and reports
// whether that wrote it. The index decides every time; nothing is
// checked and then inserted.
func (s *Store) insertUnique(ctx context.Context, tx *wtx, jp *backend.JobInsertParams, j *sluicetype.Job) (*sluicetype.Job, bool, error) {
	tg, err := json.Marshal(jp.Tags)
	if err != nil || len(jp.Tags) == 0 {
		tg = []byte("[]")
	}
	for range 5 {
		holder, err := scanJob(tx.QueryRow(ctx, tx.q(sqlUniqueHolder), jp.UniqueKey))
		if err == nil {
			return holder, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("postgres: insert job %s: unique key %s: %w", jp.ID, jp.UniqueKey, err)
		}
		ids, err := queryStrings(ctx, tx, tx.q(sqlInsertJobs), []string{jp.ID}, []string{jp.Queue}, []string{jp.Kind},
			[]*string{strPtr(jp.Payload)}, []int32{int32(jp.SchemaVersion)}, []*string{strPtr(jp.Metadata)}, []string{string(tg)},
			[]int32{int32(jp.Priority)}, []string{string(j.State)}, []int32{int32(jp.MaxAttempts)}, []string{jp.Fingerprint},
			[]int64{j.ScheduledAt.UnixNano()}, []*int64{nanosPtr(jp.Deadline)}, []int64{int64(jp.Timeout)}, tx.nowNs,
			[]string{jp.UniqueKey}, []int32{int32(jp.UniqueStates)})
		if err != nil {
			return nil, false, fmt.Errorf("postgres: insert job %s: %w", jp.ID, err)
		}
		if len(ids) == 1 {
			return nil, true, nil
		}
	}
	return nil, false, fmt.Errorf("postgres: insert job %s: unique key %s: %w: its holders kept changing", jp.ID, jp.UniqueKey, sluicetype.ErrBusy)
}

// sqlUniqueHolderOf finds, for job $1, the other job holding its unique
// key, when the state it would move to ($2, its unique-states bit) holds
// it: the key and the holder's id.
var sqlUniqueHolderOf = `SELECT j.unique_key, h.id FROM {s}.jobs j JOIN {s}.jobs h ON h.unique_key = j.unique_key AND h.id <> j.id
	WHERE j.id = $1 AND j.unique_key <> '' AND (j.unique_states & $2::int) <> 0 AND ` + uniqueHoldsSQL("h") + ` LIMIT 1`

// sqlCopyHolderOf finds, for job $1, the job holding its unique key, $1
// itself among them, when a copy's state ($2's bit) holds it: a copy of
// $1 (retry with input, replay) takes the key while none holds it.
var sqlCopyHolderOf = `SELECT j.unique_key, h.id FROM {s}.jobs j JOIN {s}.jobs h ON h.unique_key = j.unique_key
	WHERE j.id = $1 AND j.unique_key <> '' AND (j.unique_states & $2::int) <> 0 AND ` + uniqueHoldsSQL("h") + ` LIMIT 1`

// uniqueHolderOf returns the refusal of a move of job id into the states
// that hold its key while another job holds it, or nil.
// query is sqlUniqueHolderOf with the schema in place; to the state the
// move leads to.
func uniqueHolderOf(ctx context.Context, q querier, query, verb, id string, to sluicetype.State) (*sluicetype.UniqueHeldError, error) {
	bit := sluicetype.UniqueStateBit(to)
	if bit == 0 {
		return nil, nil
	}
	var key, holder string
	err := q.QueryRow(ctx, query, id, bit).Scan(&key, &holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: %s job %s: unique key holder: %w", verb, id, err)
	}
	return &sluicetype.UniqueHeldError{Verb: verb, ID: id, Key: key, HolderID: holder}, nil
}

// isUniqueHeld reports the index jobs_unique_key refusing a write.
func isUniqueHeld(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "jobs_unique_key"
}

// uniqueHoldsSQL is true of a row (of alias, "" for none) that holds its
// unique key: its state's bit (sluicetype.UniqueStateBit) is set in its
// unique_states. It is written as the expression of jobs_unique_key
// (migration 0011) equal to the empty string, the holders' value there, so that the
// planner finds a key's holder in that index.
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
