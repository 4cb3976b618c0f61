package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Claims: available jobs to running under new leases, in one statement.

// maxArchivePerClaim bounds the jobs one claim archives for their deadline.
const maxArchivePerClaim = 1000

// pickSQL picks available jobs of queue $4 for a claim: cond is the crash
// condition (which names the partial index's own term so the planner uses
// it), limit the LIMIT expression. FOR UPDATE SKIP LOCKED: concurrent
// claims pass each other's rows by instead of waiting for them.
func pickSQL(cond, limit string) string {
	return `SELECT c.id FROM {s}.jobs c, n
		WHERE c.state = 'available' AND ` + cond + ` AND c.queue = $4
		AND (c.deadline IS NULL OR c.deadline >= n.t) AND NOT (SELECT p FROM paused)
		AND ($8::text[] IS NULL OR EXISTS (SELECT 1 FROM kinds WHERE kinds.k = c.kind AND c.schema_version <= kinds.v))
		ORDER BY c.priority, c.scheduled_at, c.id LIMIT ` + limit + `
		FOR UPDATE OF c SKIP LOCKED`
}

// sqlClaim is the whole claim, one statement (so no BEGIN or COMMIT round
// trips): it archives the queue's available jobs past their deadline as
// the plan's PastDeadline says (with their events), takes up to $5 jobs
// that never crashed, then up to $6 on their first crash when those do
// not fill the batch, then, when $7 and nothing else was taken, one that
// crashed twice or more; it sets lease and fence on them and adds the
// counter deltas.
//
// The claimed UPDATE probes the primary key with an array of the taken ids
// (j.id = ANY(ARRAY(…))) as well as joining them: a generic plan cannot
// see the LIMIT's value, expects a tenth of the queue to be taken, and
// without the array merge-joined the taken ids against the whole primary
// key — 2.6 s per claim at 649,000 rows, 6.1 s at 968,000 (scripts/bench
// pressure; TestClaimPlanUnderBacklog).
//
// $1 lease id, $2 worker, $3 lease length (ns), $4 queue, $5 limit, $6
// suspects, $7 lone, $8 kinds and $9 their newest versions (NULL: any),
// $10 the past-deadline state (empty: leave them alone), $11 its reason,
// $12 last error, $13 error pattern, $14-$18 its event (kind, actor,
// from, to, message).
var sqlClaim = `WITH n AS MATERIALIZED (SELECT ` + sqlNow + ` AS t),
	shard AS MATERIALIZED (SELECT floor(random() * ` + fmt.Sprint(countShards) + `)::int AS k),
	paused AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM {s}.queues WHERE name = $4 AND paused) AS p),
	kinds AS MATERIALIZED (SELECT k, v FROM unnest($8::text[], $9::int[]) AS x(k, v)),
	dead AS (
		UPDATE {s}.jobs j SET state = $10, terminal_reason = $11, finalized_at = n.t, state_changed_at = n.t,
			version = j.version + 1, last_error = $12, error_pattern = $13
		FROM n, (SELECT d.id FROM {s}.jobs d, n
			WHERE d.state = 'available' AND d.deadline IS NOT NULL AND d.queue = $4 AND d.deadline < n.t
			AND $10 <> '' AND NOT (SELECT p FROM paused)
			AND ($8::text[] IS NULL OR d.kind IN (SELECT k FROM kinds))
			ORDER BY d.deadline LIMIT ` + fmt.Sprint(maxArchivePerClaim) + ` FOR UPDATE OF d SKIP LOCKED) x
		WHERE j.id = x.id
		RETURNING ` + jobColumnsOf("j") + `),
	dead_events AS (
		INSERT INTO {s}.job_events (job_id, kind, at, actor, from_state, to_state, attempt, message)
		SELECT d.id, $14, n.t, $15, $16, $17, d.attempt, $18 FROM dead d, n),
	picked AS MATERIALIZED (` + pickSQL("c.crash_attempt = 0", "$5") + `),
	spicked AS MATERIALIZED (` + pickSQL("c.crash_attempt > 0 AND c.crash_attempt = 1",
	"greatest(0, least($6, $5 - (SELECT count(*) FROM picked)))") + `),
	lpicked AS MATERIALIZED (` + pickSQL("c.crash_attempt > 0 AND c.crash_attempt >= 2",
	"CASE WHEN $7 AND $5 > 0 AND NOT EXISTS (SELECT 1 FROM picked) AND NOT EXISTS (SELECT 1 FROM spicked) THEN 1 ELSE 0 END") + `),
	taken AS (SELECT id, 0 AS grp FROM picked UNION ALL SELECT id, 1 FROM spicked UNION ALL SELECT id, 2 FROM lpicked),
	claimed AS (
		UPDATE {s}.jobs j SET state = 'running', fence = j.fence + 1, lease_id = $1, lease_worker = $2,
			lease_expires_at = n.t + $3, attempted_at = n.t, attempted_by = $2, state_changed_at = n.t,
			version = j.version + 1
		FROM n, taken a WHERE j.id = ANY(ARRAY(SELECT id FROM taken)) AND j.id = a.id
		RETURNING a.grp, ` + jobColumnsOf("j") + `),
	counted AS (
		INSERT INTO {s}.job_counts (queue, state, shard, n)
		SELECT $4, c.st, (SELECT k FROM shard), c.d FROM (
			SELECT 'available' AS st, -((SELECT count(*) FROM claimed) + (SELECT count(*) FROM dead)) AS d
			UNION ALL SELECT 'running', (SELECT count(*) FROM claimed)
			UNION ALL SELECT $10, (SELECT count(*) FROM dead)) c
		WHERE c.d <> 0 ORDER BY c.st
		ON CONFLICT (queue, state, shard) DO UPDATE SET n = job_counts.n + excluded.n)
SELECT n.t, r.* FROM n, (
	SELECT 0 AS tag, grp, ` + jobColumns + ` FROM claimed
	UNION ALL SELECT 1, 0, ` + jobColumns + ` FROM dead) r
ORDER BY r.tag, r.grp, r.priority, r.scheduled_at, r.id`

// JobClaim applies one claim (see sqlClaim).
func (s *Store) JobClaim(ctx context.Context, p *engine.JobClaimParams) (*engine.JobClaimResult, error) {
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	var kinds []string
	var versions []int32
	if len(p.Kinds) > 0 {
		kinds = make([]string, 0, len(p.Kinds))
		for k := range p.Kinds {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			versions = append(versions, int32(p.Kinds[k]))
		}
	}
	pd := &p.PastDeadline
	limit := max(p.Limit, 0)
	res := &engine.JobClaimResult{}
	err := s.claimTx(ctx, pd, res, func(q querier) error {
		res.Jobs, res.Dead, res.Now = nil, nil, time.Time{}
		rows, err := q.Query(ctx, s.sql(sqlClaim), p.LeaseID, p.WorkerID, int64(lease), p.Queue, limit, max(p.Suspects, 0), p.Lone,
			kinds, versions, string(pd.To), string(pd.Reason), pd.LastError, pd.Pattern,
			string(pd.Event.Kind), pd.Event.Actor, string(pd.Event.From), string(pd.Event.To), pd.Event.Message)
		if err != nil {
			return err
		}
		defer rows.Close()
		var r jobRow
		var now int64
		var tag, grp int32
		dest := append([]any{&now, &tag, &grp}, r.dest()...)
		for rows.Next() {
			r = jobRow{}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			j, err := r.job()
			if err != nil {
				return err
			}
			res.Now = fromNanos(now)
			if tag == 0 {
				res.Jobs = append(res.Jobs, j)
			} else {
				res.Dead = append(res.Dead, j)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim %s: %w", p.Queue, err)
	}
	if res.Now.IsZero() {
		// Nothing claimed: the statement returned no row to carry its now.
		if res.Now, err = s.Now(ctx); err != nil {
			return nil, err
		}
	}
	return res, nil
}
