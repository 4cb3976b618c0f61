package main

// What the pressure scenario samples from PostgreSQL each phase: table
// statistics and sizes, the claim's plan, and pg_stat_statements.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// relStats are one table's statistics and sizes.
type relStats struct {
	live, dead, autovacuum int64
	heap, total            int64
}

type tableStats struct {
	jobs, counts relStats
	otherDead    int64
	indexes      string // name:MB,... of the jobs table's indexes
	claimIndex   int64  // bytes of jobs_claim
}

func (r *pressureRun) tableStats(ctx context.Context) (tableStats, error) {
	var s tableStats
	rows, err := r.admin.Query(ctx, `SELECT relname, n_live_tup, n_dead_tup, autovacuum_count,
		pg_relation_size(relid), pg_total_relation_size(relid)
		FROM pg_stat_user_tables WHERE schemaname = $1`, r.schema)
	if err != nil {
		return s, fmt.Errorf("table stats: %w", err)
	}
	for rows.Next() {
		var name string
		var x relStats
		if err := rows.Scan(&name, &x.live, &x.dead, &x.autovacuum, &x.heap, &x.total); err != nil {
			rows.Close()
			return s, fmt.Errorf("table stats: %w", err)
		}
		switch name {
		case "jobs":
			s.jobs = x
		case "job_counts":
			s.counts = x
		default:
			s.otherDead += x.dead
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("table stats: %w", err)
	}
	rows, err = r.admin.Query(ctx, `SELECT indexrelname, pg_relation_size(indexrelid)
		FROM pg_stat_user_indexes WHERE schemaname = $1 AND relname = 'jobs' ORDER BY indexrelname`, r.schema)
	if err != nil {
		return s, fmt.Errorf("index stats: %w", err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return s, fmt.Errorf("index stats: %w", err)
		}
		if name == "jobs_claim" {
			s.claimIndex = size
		}
		parts = append(parts, fmt.Sprintf("%s:%.2f", strings.TrimPrefix(name, "jobs_"), float64(size)/(1<<20)))
	}
	s.indexes = strings.Join(parts, ",")
	return s, rows.Err()
}

// sample writes the timeline, follows the oldest snapshot's age and takes
// the claim's EXPLAIN samples until ctx ends.
func (r *pressureRun) sample(ctx context.Context) error {
	t0 := time.Now()
	every := r.o.sampleEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(min(every, time.Second))
	defer t.Stop()
	var lastStats, lastExplain time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			i := int(r.cur.Load())
			var p *pressurePhase
			if i < len(r.phases) {
				p = r.phases[i]
			}
			// The xmin horizon's age each second: the idle XID and the
			// readers show here, as does anything else holding it.
			var age int64
			if err := r.admin.QueryRow(ctx, `SELECT coalesce(max(greatest(age(backend_xmin), age(backend_xid))), 0)
				FROM pg_stat_activity WHERE backend_xmin IS NOT NULL OR backend_xid IS NOT NULL`).Scan(&age); err != nil {
				return fmt.Errorf("xmin age: %w", err)
			}
			if p != nil {
				r.latMu.Lock()
				p.xminAgeMax = max(p.xminAgeMax, age)
				r.latMu.Unlock()
			}
			var ex *claimExplain
			if r.o.explainEvery > 0 && now.Sub(lastExplain) >= r.o.explainEvery {
				lastExplain = now
				x, err := r.explainClaim(ctx)
				switch {
				case err != nil && ctx.Err() == nil:
					r.progress("claim explain: %v", err)
				case err == nil && x != nil:
					ex = x
					if p != nil {
						r.latMu.Lock()
						p.explains = append(p.explains, *x)
						r.latMu.Unlock()
					}
				}
			}
			if r.timeline == nil || (now.Sub(lastStats) < every && ex == nil) {
				continue
			}
			lastStats = now
			s, err := r.tableStats(ctx)
			if err != nil {
				return err
			}
			name := "drain"
			if p != nil {
				name = p.name
			}
			pb, cb, ms := "", "", ""
			if ex != nil {
				pb, cb, ms = fmt.Sprint(ex.pickBuffers), fmt.Sprint(ex.buffers), fmt.Sprintf("%.3f", ex.execMS)
			}
			enq, owed, h := r.enqueued.Load(), r.owed.Load(), r.handled.Load()
			r.tlMu.Lock()
			fmt.Fprintf(r.timeline, "%.1f,%s,%d,%d,%d,%d,%d,%d,%d,%d,%.2f,%.2f,%d,%s,%s,%s\n",
				now.Sub(t0).Seconds(), name, r.offered.Load(), enq, h, enq+owed-h, owed,
				s.jobs.live, s.jobs.dead, s.jobs.autovacuum, float64(s.jobs.total)/(1<<20), float64(s.claimIndex)/(1<<20), age, pb, cb, ms)
			r.tlMu.Unlock()
		}
	}
}

// claimExplain is one EXPLAIN (ANALYZE, BUFFERS) of the claim statement.
type claimExplain struct {
	// pickBuffers are the shared buffers (hit and read) of the CTE that
	// picks the available jobs: the index scan dead tuples would slow.
	pickBuffers int64
	pickRows    int64
	pickIndex   string
	// buffers are the whole statement's (the top node's, which runs
	// the claim's UPDATE).
	buffers int64
	execMS  float64
}

// explainClaim runs the claim statement the engine runs, read from
// pg_stat_activity, under EXPLAIN (ANALYZE, BUFFERS) in a transaction it
// rolls back: the jobs it claims go back to available. It returns nil
// before the statement has been seen.
func (r *pressureRun) explainClaim(ctx context.Context) (*claimExplain, error) {
	if r.claimSQL == "" {
		var q string
		err := r.admin.QueryRow(ctx, `SELECT query FROM pg_stat_activity
			WHERE query LIKE '%FOR UPDATE OF c SKIP LOCKED%' AND query LIKE '%claimed AS%'
			AND query NOT LIKE '%c.scheduled_at) >= ($19%'
			AND query NOT LIKE '%pg_stat_activity%' LIMIT 1`).Scan(&q)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("find claim statement: %w", err)
		}
		r.claimSQL = q
	}
	if r.explainConn == nil {
		// A connection of its own: the prepared statement is the
		// session's, and the pool's connections have their own cache.
		c, err := pgx.Connect(ctx, r.connURL+"&application_name=sluice-pressure-explain")
		if err != nil {
			return nil, fmt.Errorf("explain connection: %w", err)
		}
		if _, err := c.Exec(ctx, "PREPARE sluice_pressure_claim AS "+r.claimSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			c.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("prepare claim (%.80s…): %w", r.claimSQL, err)
		}
		r.explainConn = c
	}
	tx, err := r.explainConn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The store's connections run the claim as a prepared statement,
	// which PostgreSQL plans generically after five runs: in this
	// benchmark that plan joined the picked ids to a sequential scan of
	// the jobs table. A session that runs it every few seconds would
	// keep custom plans, so the plan is forced either way.
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_"+r.o.explainPlan+"_plan", pgx.QueryExecModeSimpleProtocol); err != nil {
		return nil, fmt.Errorf("explain claim: %w", err)
	}
	// (The claim from the start, not from the claim cursor: the sample is
	// what a claim that walks every dead entry reads and costs.)
	// The parameters of backend/postgres's sqlClaim as the engine sends
	// them: a lease, a worker, 30 s, the queue, the limit, no suspects,
	// not lone, the one kind at version 1, no past-deadline state.
	// Literals: EXPLAIN EXECUTE takes no bind parameters of its own.
	var plan []byte
	err = tx.QueryRow(ctx, fmt.Sprintf(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE sluice_pressure_claim(
		'pressure-explain', 'pressure-explain', 30000000000, %s, %d, 0, false, ARRAY[%s], ARRAY[1], '', '', '', '', '', '', '', '', '')`,
		quoteLiteral(r.o.queue), r.o.explainLimit, quoteLiteral(benchKind)), pgx.QueryExecModeSimpleProtocol).Scan(&plan)
	if err != nil {
		return nil, fmt.Errorf("explain claim: %w", err)
	}
	if r.explain != nil {
		r.tlMu.Lock()
		fmt.Fprintf(r.explain, "{\"phase\":%q,\"at\":%q,\"plan\":%s}\n", r.phaseName(), time.Now().UTC().Format(time.RFC3339), compactJSON(plan))
		r.tlMu.Unlock()
	}
	return parseClaimPlan(plan)
}

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func compactJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return "null"
	}
	out, _ := json.Marshal(v)
	return string(out)
}

type planNode struct {
	NodeType    string     `json:"Node Type"`
	SubplanName string     `json:"Subplan Name"`
	IndexName   string     `json:"Index Name"`
	Relation    string     `json:"Relation Name"`
	ActualRows  float64    `json:"Actual Rows"`
	SharedHit   int64      `json:"Shared Hit Blocks"`
	SharedRead  int64      `json:"Shared Read Blocks"`
	Plans       []planNode `json:"Plans"`
}

func parseClaimPlan(b []byte) (*claimExplain, error) {
	var doc []struct {
		Plan          planNode `json:"Plan"`
		ExecutionTime float64  `json:"Execution Time"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc) == 0 {
		return nil, fmt.Errorf("claim plan: %w", errors.Join(err, errors.New("no plan")))
	}
	x := &claimExplain{execMS: doc[0].ExecutionTime, pickBuffers: -1,
		buffers: doc[0].Plan.SharedHit + doc[0].Plan.SharedRead}
	var walk func(n *planNode, inPick bool)
	walk = func(n *planNode, inPick bool) {
		if n.SubplanName == "CTE picked" {
			x.pickBuffers, x.pickRows, inPick = n.SharedHit+n.SharedRead, int64(n.ActualRows), true
		}
		if inPick && n.Relation == "jobs" && x.pickIndex == "" {
			x.pickIndex = n.NodeType + ":" + n.IndexName
		}
		for k := range n.Plans {
			walk(&n.Plans[k], inPick)
		}
	}
	walk(&doc[0].Plan, false)
	if x.pickBuffers < 0 {
		return nil, errors.New("claim plan: no CTE picked")
	}
	return x, nil
}

// resetStatements starts a phase's pg_stat_statements afresh, where the
// server has it (the private cluster loads it; another server may not).
func (r *pressureRun) resetStatements(ctx context.Context) {
	if _, err := r.admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return
	}
	r.admin.Exec(ctx, `SELECT pg_stat_statements_reset()`)
}

// statementsOfPhase writes the phase's eight costliest statements by
// total execution time to the progress log: calls, mean and total ms,
// shared buffers per call, and the statement's first words.
func (r *pressureRun) statementsOfPhase(ctx context.Context, phase string) {
	rows, err := r.admin.Query(ctx, `SELECT calls, mean_exec_time, total_exec_time,
		(shared_blks_hit + shared_blks_read)::float8 / greatest(calls, 1), left(regexp_replace(query, '\s+', ' ', 'g'), 90)
		FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 8`)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var calls int64
		var mean, total, bufs float64
		var q string
		if rows.Scan(&calls, &mean, &total, &bufs, &q) == nil {
			r.progress("phase %s statement: calls=%d mean_ms=%.3f total_s=%.1f buffers_per_call=%.0f %s", phase, calls, mean, total/1000, bufs, q)
		}
	}
}
