package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Claims: available jobs to running under new leases, in one statement.

// maxArchivePerClaim bounds the jobs one claim archives for their deadline.
const maxArchivePerClaim = 1000

// pickSQL picks available jobs of queue $4 for a claim: cond is the crash
// condition (which names the partial index's own term so the planner uses
// it), limit the LIMIT expression. FOR UPDATE SKIP LOCKED: concurrent
// claims pass each other's rows by instead of waiting for them.
func pickSQL(cond, limit, bound string) string {
	return `SELECT c.id FROM {s}.jobs c, n
		WHERE c.state = 'available' AND ` + cond + ` AND c.queue = $4` + bound + `
		AND (c.deadline IS NULL OR c.deadline >= n.t) AND NOT (SELECT p FROM paused)
		AND ($8::text[] IS NULL OR EXISTS (SELECT 1 FROM kinds WHERE kinds.k = c.kind AND c.schema_version <= kinds.v))
		ORDER BY c.priority, c.scheduled_at, c.id LIMIT ` + limit + `
		FOR UPDATE OF c SKIP LOCKED`
}

// sqlClaim is the whole claim, one statement (so no BEGIN or COMMIT round
// trips); its rows come in no order, and JobClaim puts them in claim order
// (inClaimOrder) rather than the statement sorting its wide rows again. It
// archives the queue's available jobs past their deadline as
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
//
// room, when not empty, is how many jobs one limit leaves (roomSQL): the
// statement takes no more than that, and returns it as the column after
// now (see claimUnderOneLimit).
func claimSQL(bound, part, room string) string {
	lim, roomCol, roomCTE := "$5", "", ""
	if room != "" {
		lim, roomCol = "(SELECT r FROM room)", "(SELECT r FROM room), "
		roomCTE = `
	room AS MATERIALIZED (SELECT greatest(0, least($5::bigint, ` + room + `)) AS r),`
	}
	return `WITH n AS MATERIALIZED (SELECT ` + sqlNow + ` AS t),` + roomCTE + `
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
	picked AS MATERIALIZED (` + pickSQL("c.crash_attempt = 0"+part, lim, bound) + `),
	spicked AS MATERIALIZED (` + pickSQL("c.crash_attempt > 0 AND c.crash_attempt = 1"+part,
		"greatest(0, least($6, "+lim+" - (SELECT count(*) FROM picked)))", "") + `),
	lpicked AS MATERIALIZED (` + pickSQL("c.crash_attempt > 0 AND c.crash_attempt >= 2"+part,
		"CASE WHEN $7 AND "+lim+" > 0 AND NOT EXISTS (SELECT 1 FROM picked) AND NOT EXISTS (SELECT 1 FROM spicked) THEN 1 ELSE 0 END", "") + `),
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
SELECT n.t, ` + roomCol + `r.* FROM n, (
	SELECT 0 AS tag, grp, ` + jobColumns + ` FROM claimed
	UNION ALL SELECT 1, 0, ` + jobColumns + ` FROM dead) r`
}

// sqlClaim is the claim from the start of the queue's claim index;
// sqlClaimFrom starts its scan of jobs that never crashed at a cursor:
// $19 priority, $20 scheduled_at (see claimCursor).
var (
	sqlClaim     = claimSQL("", "", "")
	sqlClaimFrom = claimSQL(cursorBound, "", "")
)

const cursorBound = " AND (c.priority, c.scheduled_at) >= ($19::int, $20::bigint)"

// The claims under one concurrency limit of a kind or a queue, from the
// start of the index and from a cursor: $19 (or, from a cursor, $21) the
// limit's concurrency, the next its name.
var (
	sqlClaimUnderKind      = claimSQL("", "", roomSQL(sluicetype.LimitKind, 19))
	sqlClaimUnderKindFrom  = claimSQL(cursorBound, "", roomSQL(sluicetype.LimitKind, 21))
	sqlClaimUnderQueue     = claimSQL("", "", roomSQL(sluicetype.LimitQueue, 19))
	sqlClaimUnderQueueFrom = claimSQL(cursorBound, "", roomSQL(sluicetype.LimitQueue, 21))
)

// roomSQL is the room a concurrency limit of scope leaves: $n its
// concurrency less the running jobs it covers ($n+1 its name).
func roomSQL(scope sluicetype.LimitScope, n int) string {
	return fmt.Sprintf("$%d::bigint - (%s)", n, strings.ReplaceAll(limitRunningSQL(scope), "$1", fmt.Sprintf("$%d", n+1)))
}

// claimCursor is where a queue's claims of jobs that never crashed start
// their index scan, so that they do not walk the entries of the jobs
// claimed before: each claim leaves one in jobs_claim, pointing at a row
// version that is dead but, while any transaction holds an older
// snapshot (an idle transaction holding an XID), can be neither vacuumed
// nor marked dead in the index. With one held for ten minutes at 2,000
// jobs/s a claim read 25,000 buffers and took 100–340 ms (scripts/bench
// pressure); the claims fell behind.
//
// Claims run from the start of the index while that is cheap. Once one
// takes claimCursorAfter (claim_cursor, 25 ms) or longer, the claims of
// that queue and kind filter (a cursor is the filter's own: a filtered
// claim passes jobs of other kinds by) start at the cursor: the order key
// of the last job a claim took, less claimCursorMargin: an enqueue's
// scheduled_at is its transaction's start, and under load its commit came
// later than 100 ms after it (waiting for the NOTIFY queue's lock and
// the WAL flush): with a margin of 100 ms those jobs sat behind the
// cursor until a probe found them, and the claims of scripts/bench
// pressure's first minute ran in bursts, a thousand at each probe. At
// 2,000 jobs/s the margin of a second holds 2,000 dead entries: a pick of
// 100 read 61 buffers from the cursor, against 548 from the start after
// 20,000 claims (TestClaimCursorSkipsDeadEntries).
//
// A job can become available behind the cursor: a higher priority than
// the cursor's, a job scheduled in the past, a due job promoted, a retry,
// a job handed back. When this Store inserted it, the cursor moves back
// to it; when this Store wrote it otherwise, the write moves the cursors'
// generation (cursorReset) and the next claims run from the start. When
// another process wrote it, a probe finds it: a read of the first
// claimable job from the start of the index, without locks and off the
// claim path (claimProbe), which moves the cursor back to what it finds.
// A probe runs claimProbeEvery after the last (100 ms once a claim found
// the queue caught up), or ten times its own time if that is longer,
// so that walking the dead entries takes a tenth of a connection at
// most and never holds a claim up: claims from the start that did this
// walk themselves, a second apart and 1.3 s each at the end of the ten
// minutes, are what the claims fell behind on. A probe that is
// fast again ends cursor mode. The cursor only picks where a scan
// starts: which jobs may be claimed, in which order, is the statement's
// alone.
type claimCursor struct {
	priority  int32
	scheduled int64
	// gen is the cursors' generation when the last claim from the start
	// began: a write since then may have put a job behind the cursor.
	gen uint64
	// full is when the last claim from the start or probe began, fullTook
	// how long it took; probing: a probe is running; stale: a claim from
	// the cursor found the queue caught up.
	full     time.Time
	fullTook time.Duration
	probing  bool
	stale    bool
	set      bool
	// back counts the moves back (cursorBack, a probe): a claim from the
	// cursor that began before one does not move the cursor forward.
	back uint64
}

// cursorKey names a cursor: a queue and a claim's kind filter.
type cursorKey struct {
	queue, kinds string
}

// cursorKeyOf is the cursor of a claim of queue with kinds and versions
// (sorted by kind; nil: any).
func cursorKeyOf(queue string, kinds []string, versions []int32) cursorKey {
	if len(kinds) == 0 {
		return cursorKey{queue: queue}
	}
	var b strings.Builder
	for i, k := range kinds {
		fmt.Fprintf(&b, "%d:%s=%d;", len(k), k, versions[i])
	}
	return cursorKey{queue, b.String()}
}

const (
	claimSlowFull     = 25 * time.Millisecond // the default of claim_cursor
	claimCursorMargin = int64(time.Second)
	claimProbeEvery   = time.Second
	claimStaleGap     = 100 * time.Millisecond
	// A probe waits at least claimProbeShare times its last one's time.
	claimProbeShare = 10
)

// claimFrom reports whether a claim of key beginning now starts at the
// cursor c, the cursors' generation, and whether the claim is to start the
// cursor's probe (the cursor is marked probing).
func (s *Store) claimFrom(key cursorKey, now time.Time) (c claimCursor, from bool, gen uint64, probe bool) {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	c, gen = s.cursors[key], s.cursorGen
	if !c.set || s.claimCursorAfter <= 0 || c.fullTook < s.claimCursorAfter || c.gen != gen {
		return c, false, gen, false
	}
	since := now.Sub(c.full)
	wait := max(claimProbeEvery, claimProbeShare*c.fullTook)
	if c.stale {
		wait = max(claimStaleGap, claimProbeShare*c.fullTook)
	}
	if !c.probing && since >= wait && !s.closed.Load() {
		c.probing, c.full = true, now
		s.cursors[key] = c
		s.probes.Add(1) // under cursorMu: Close's barrier (see Close)
		probe = true
	}
	return c, true, gen, probe
}

// sqlClaimProbe is the order key of the first job a claim of queue $1 with
// kinds $2 and versions $3 (NULL: any) may take, read without locks and
// with no write: the claim's pick from the start of jobs_claim, for
// claimProbe.
const sqlClaimProbe = `SELECT c.priority, c.scheduled_at FROM {s}.jobs c
	WHERE c.state = 'available' AND c.crash_attempt = 0 AND c.queue = $1
	AND (c.deadline IS NULL OR c.deadline >= ` + sqlNow + `)
	AND ($2::text[] IS NULL OR EXISTS (SELECT 1 FROM unnest($2::text[], $3::int[]) AS k(k, v)
		WHERE k.k = c.kind AND c.schema_version <= k.v))
	ORDER BY c.priority, c.scheduled_at, c.id LIMIT 1`

// claimProbe reads where the claims of key would start from the start of
// the index and moves the cursor back there if that is behind it; its
// time decides whether the claims stay in cursor mode (see claimCursor).
// It runs on its own goroutine, one per cursor at a time.
func (s *Store) claimProbe(key cursorKey, kinds []string, versions []int32) {
	defer s.probes.Done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	var prio int32
	var sched int64
	err := s.pool.QueryRow(ctx, s.sql(sqlClaimProbe), key.queue, kinds, versions).Scan(&prio, &sched)
	took := time.Since(began)
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	c := s.cursors[key]
	c.probing = false
	switch {
	case err == nil:
		if (orderKey{prio, sched}).before(orderKey{c.priority, c.scheduled}) {
			c.priority, c.scheduled = prio, sched
			c.back++
		}
		c.fullTook = took
	case errors.Is(err, pgx.ErrNoRows):
		c.fullTook = took
	default:
		// The next probe tries again; the claims keep their cursor.
		if !s.closed.Load() {
			s.log.Warn("postgres: claim probe", "queue", key.queue, "err", err)
		}
	}
	s.cursors[key] = c
}

// cursorReset makes the next claim of every cursor run from the start: a
// write of this Store may have put a job behind them.
func (s *Store) cursorReset() {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	s.cursorGen++
}

// orderKey is a job's place in claim order (before its id).
type orderKey struct {
	priority  int32
	scheduled int64
}

func (k orderKey) before(o orderKey) bool {
	return k.priority < o.priority || (k.priority == o.priority && k.scheduled < o.scheduled)
}

// cursorBack moves every cursor of queue that is past k back to it: this
// Store made a job at k available (an insert, a promotion). A claim from
// the cursor in flight meanwhile does not move it forward again (back).
func (s *Store) cursorBack(queue string, k orderKey) {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	for key, c := range s.cursors {
		if key.queue == queue && c.set && k.before(orderKey{c.priority, c.scheduled}) {
			c.priority, c.scheduled = k.priority, k.scheduled
			c.back++
			s.cursors[key] = c
		}
	}
}

// claimed moves key's cursor after a claim that began at began with the
// cursors at generation gen and the cursor at back moves back, ran from the
// cursor or not, asked for limit jobs and took these (in claim order).
func (s *Store) claimed(key cursorKey, from bool, gen, back uint64, limit int, jobs []*sluicetype.Job, began time.Time) {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	if s.cursors == nil {
		s.cursors = map[cursorKey]claimCursor{}
	}
	c := s.cursors[key]
	if !from {
		c.full, c.fullTook, c.gen = began, time.Since(began), gen
		s.fullClaims.Add(1)
	}
	var last *sluicetype.Job
	n := 0
	for _, j := range jobs {
		if j.CrashAttempt == 0 {
			last, n = j, n+1
		}
	}
	if last != nil && c.back == back {
		c.priority = int32(last.Priority)
		c.scheduled = last.ScheduledAt.UnixNano() - claimCursorMargin
		c.set = true
	}
	c.stale = n < limit
	s.cursors[key] = c
}

// claimedJob is a job a claim returned and the group the claim took it
// in: 0 never crashed, 1 on its first crash, 2 the lone suspect.
type claimedJob struct {
	job   *sluicetype.Job
	group int32
}

// inClaimOrder returns the jobs in the order the claim took them: by
// group, then in the claim index's order (priority, scheduled_at, id; ids
// compare as bytes, as their "C" collation does).
func inClaimOrder(cs []claimedJob) []*sluicetype.Job {
	slices.SortFunc(cs, func(a, b claimedJob) int {
		x, y := a.job, b.job
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(x.Priority, y.Priority),
			x.ScheduledAt.Compare(y.ScheduledAt), strings.Compare(x.ID, y.ID))
	})
	jobs := make([]*sluicetype.Job, len(cs))
	for i, c := range cs {
		jobs[i] = c.job
	}
	return jobs
}

// JobClaim applies one claim (see sqlClaim).
func (s *Store) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	all, err := s.limits.Get(ctx, s.readLimits)
	if err != nil {
		return nil, err
	}
	var under *sluicetype.Limit
	if lim := backend.LimitsFor(p, all); len(lim) > 0 {
		if !underOneLimit(p, lim) {
			return s.claimLimited(ctx, p, lim)
		}
		under = &lim[0]
	}
	kinds, versions := kindArrays(p.Kinds)
	pd := &p.PastDeadline
	limit := max(p.Limit, 0)
	res := &backend.JobClaimResult{}
	began := time.Now()
	key := cursorKeyOf(p.Queue, kinds, versions)
	cur, from, gen, probe := s.claimFrom(key, began)
	if probe {
		go s.claimProbe(key, kinds, versions)
	}
	room := int64(-1)
	err = s.claimTx(ctx, pd, res, func(q querier) error {
		return s.claimIn(ctx, q, p, res, kinds, versions, from, cur, under, &room)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim %s: %w", p.Queue, err)
	}
	asked := limit
	if under != nil {
		// The limit's room, not the queue, may have cut the claim short:
		// the cursor reads "caught up" only from a claim the room did
		// not bound (none returned no room: asked 0), and Bound is
		// ClaimUnderLimits' for one limit.
		asked = int(max(room, 0))
		res.Limited = true
		res.Bound = room > 0 && int(room) < limit && len(res.Jobs) == int(room)
	}
	s.claimed(key, from, gen, cur.back, asked, res.Jobs, began)
	if res.Now.IsZero() {
		// Nothing claimed: the statement returned no row to carry its now.
		if res.Now, err = s.Now(ctx); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// underOneLimit reports whether a claim that lim covers is a claim under
// one concurrency limit that JobClaim's statement applies itself
// (claimSQL's room): a queue's, or the limit of the one kind the claim
// names, with no rate and no partition. It is the common case, a kind or
// a queue protecting one downstream, and it costs one round trip where
// claimLimited's transaction costs four.
func underOneLimit(p *backend.JobClaimParams, lim []sluicetype.Limit) bool {
	if len(lim) != 1 || lim[0].Concurrency <= 0 || lim[0].Rate > 0 || lim[0].Key != "" || p.Partition != nil {
		return false
	}
	switch l := lim[0]; l.Scope {
	case sluicetype.LimitQueue:
		return true
	case sluicetype.LimitKind:
		_, ok := p.Kinds[l.Name]
		return ok && len(p.Kinds) == 1
	}
	return false
}

// claimUnderSQL is the claim under one limit of scope (see underOneLimit).
func claimUnderSQL(scope sluicetype.LimitScope, from bool) string {
	switch {
	case scope == sluicetype.LimitQueue && from:
		return sqlClaimUnderQueueFrom
	case scope == sluicetype.LimitQueue:
		return sqlClaimUnderQueue
	case from:
		return sqlClaimUnderKindFrom
	}
	return sqlClaimUnderKind
}

// claimIn runs the claim statement for p on q, into res. Under a limit
// (under, see underOneLimit) the statement follows the limit's advisory
// lock in one pipeline, so that it counts the running jobs after the
// claim before it committed (see claimLimited), and room receives what
// the limit left (-1: no job returned to carry it).
func (s *Store) claimIn(ctx context.Context, q querier, p *backend.JobClaimParams, res *backend.JobClaimResult,
	kinds []string, versions []int32, from bool, cur claimCursor, under *sluicetype.Limit, room *int64) (err error) {
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	pd := &p.PastDeadline
	limit := max(p.Limit, 0)
	res.Jobs, res.Dead, res.Now = nil, nil, time.Time{}
	args := []any{p.LeaseID, p.WorkerID, int64(lease), p.Queue, limit, max(p.Suspects, 0), p.Lone,
		kinds, versions, string(pd.To), string(pd.Reason), pd.LastError, pd.Pattern,
		string(pd.Event.Kind), pd.Event.Actor, string(pd.Event.From), string(pd.Event.To), pd.Event.Message}
	query := sqlClaim
	if pt := p.Partition; pt != nil {
		// A partitioned limit: only a job whose partition has room. Key
		// is a plain field name (sluicetype.ValidLimitKey), so a literal.
		query = claimSQL("", fmt.Sprintf(` AND (SELECT count(*) FROM {s}.jobs r
			WHERE r.state = 'running' AND r.kind = c.kind
			AND coalesce(r.payload ->> '%[1]s', '') = coalesce(c.payload ->> '%[1]s', '')) < %[2]d`, pt.Key, pt.Max), "")
	} else if from {
		query = sqlClaimFrom
		args = append(args, cur.priority, cur.scheduled)
	}
	var rows pgx.Rows
	if under != nil {
		query = claimUnderSQL(under.Scope, from)
		args = append(args, int64(under.Concurrency), under.Name)
		b := &pgx.Batch{}
		b.Queue(sqlLimitLock, s.limitLockKey(*under))
		b.Queue(s.sql(query), args...)
		br := q.SendBatch(ctx, b)
		defer func() {
			if cerr := br.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock limit %s: %w", *under, err)
		}
		rows, err = br.Query()
	} else {
		rows, err = q.Query(ctx, s.sql(query), args...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	var r jobRow
	var now int64
	var tag, grp int32
	dest := append([]any{&now, &tag, &grp}, r.dest()...)
	if under != nil {
		dest = append([]any{&now, room, &tag, &grp}, r.dest()...)
	}
	var claimed, dead []claimedJob
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
			claimed = append(claimed, claimedJob{j, grp})
		} else {
			dead = append(dead, claimedJob{job: j})
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(claimed) > 0 {
		res.Jobs = inClaimOrder(claimed)
	}
	if len(dead) > 0 {
		res.Dead = inClaimOrder(dead)
	}
	return nil
}

// kindArrays are a claim's kinds, sorted, and their newest versions; nil
// for any kind.
func kindArrays(m map[string]int) ([]string, []int32) {
	if len(m) == 0 {
		return nil, nil
	}
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	versions := make([]int32, 0, len(kinds))
	for _, k := range kinds {
		versions = append(versions, int32(m[k]))
	}
	return kinds, versions
}
