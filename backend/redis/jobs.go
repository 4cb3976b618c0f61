package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The worker's side: inserts, claims, completions, finishes, leases and
// the maintenance sweeps.

const defaultLease = 30 * time.Second

// The most jobs one hot-path script takes: a longer batch goes as several
// scripts, so none blocks the server for long (a script should block it
// under 10 ms; a job costs a claim some 15-30 µs of the server's time, a
// completion some 10-20 µs, an insert some 12-28 µs: TestHotPathCPU).
const (
	claimChunk    = 300
	completeChunk = 300
	insertChunk   = 200
)

// JobInsertMany writes new jobs in one script; each is accepted or refused
// on its own.
func (s *Store) JobInsertMany(ctx context.Context, p *backend.JobInsertManyParams) ([]backend.JobInsertResult, error) {
	res := make([]backend.JobInsertResult, len(p.Jobs))
	if len(p.Jobs) == 0 {
		return res, nil
	}
	// Under an idempotency key the whole insert is one recorded step, so
	// it stays one script.
	if _, idem := backend.IdempotencyWriteFrom(ctx); len(p.Jobs) > insertChunk && !idem {
		for i := 0; i < len(p.Jobs); i += insertChunk {
			q := *p
			q.Jobs = p.Jobs[i:min(i+insertChunk, len(p.Jobs))]
			r, err := s.JobInsertMany(ctx, &q)
			if err != nil {
				return nil, err
			}
			copy(res[i:], r)
		}
		return res, nil
	}
	args := make([]any, 0, 1+14*len(p.Jobs))
	args = append(args, flag(p.RefuseQuarantined))
	var idx []int
	for i, jp := range p.Jobs {
		if jp == nil || jp.ID == "" {
			res[i].Err = fmt.Errorf("redis: insert job: %w: no id", sluicetype.ErrInvalid)
			continue
		}
		idx = append(idx, i)
		tags := "[]"
		if len(jp.Tags) > 0 {
			tags = jsonStrings(jp.Tags)
		}
		sched := ""
		if jp.ScheduledAt != nil {
			sched = tstr(*jp.ScheduledAt)
		}
		args = append(args, jp.ID, jp.Queue, jp.Kind, string(jp.Payload), strconv.Itoa(jp.SchemaVersion),
			string(jp.Metadata), tags, strconv.Itoa(jp.Priority), strconv.Itoa(jp.MaxAttempts), jp.Fingerprint,
			sched, dstr(jp.Delay), tptr(jp.Deadline), strconv.FormatInt(int64(jp.Timeout), 10))
	}
	if len(idx) == 0 {
		return res, nil
	}
	v, err := s.run(ctx, "insert jobs", luaInsert, args...)
	if err != nil {
		return nil, err
	}
	top, _ := v.([]any)
	now, _ := at(top, 0).(string)
	items, _ := at(top, 1).([]any)
	if len(items) != len(idx) {
		return nil, fmt.Errorf("redis: insert jobs: %d results for %d jobs", len(items), len(idx))
	}
	for n, it := range items {
		i := idx[n]
		jp := p.Jobs[i]
		r, _ := it.([]any)
		if len(r) == 0 {
			return nil, fmt.Errorf("redis: insert job %s: bad reply", jp.ID)
		}
		code, _ := r[0].(string)
		switch code {
		case "Q":
			res[i].Err = &sluicetype.QuarantinedError{Verb: "insert", ID: jp.ID, Fingerprint: jp.Fingerprint}
		case "C":
			res[i].Err = fmt.Errorf("insert job %s: %w: the id exists with other content", jp.ID, sluicetype.ErrConflict)
		case "E":
			j, err := jobReply(at(r, 1), false)
			if err != nil {
				return nil, err
			}
			res[i].Job, res[i].Existing = j, true
		case "N":
			st, _ := at(r, 1).(string)
			sch, _ := at(r, 2).(string)
			j, err := jobFrom(insertedFields(args[1+14*n:1+14*(n+1)], st, sch, now), nil)
			if err != nil {
				return nil, fmt.Errorf("redis: %w", err)
			}
			res[i].Job = j
		}
	}
	var woke []string
	for _, r := range res {
		if r.Job != nil && !r.Existing && r.Job.State == sluicetype.StateAvailable {
			woke = append(woke, r.Job.Queue)
		}
	}
	if len(woke) > 0 {
		s.publishWake(ctx, woke...) // one message for the batch
	}
	return res, nil
}

// insertedFields is the hash luaInsert wrote for a new job (without its
// payload, as its reply had it), from the 14 values JobInsertMany sent
// for it and the state, scheduled_at and now the script answered.
func insertedFields(a []any, state, sched, now string) map[string]string {
	str := func(i int) string { v, _ := a[i].(string); return v }
	return map[string]string{"id": str(0), "q": str(1), "k": str(2), "sv": str(4), "m": str(5), "tg": str(6),
		"pr": str(7), "s": state, "a": "0", "ma": str(8), "c": "0", "fp": str(9), "f": "0", "sch": sched,
		"dl": str(12), "to": str(13), "cr": now, "sca": now, "v": "1"}
}

// insertRecord turns an insert's idempotency record into the results the
// engine recorded them as.
func insertRecord(s string) ([]backend.JobInsertResult, error) {
	items, err := dec(s)
	if err != nil {
		return nil, err
	}
	out := make([]backend.JobInsertResult, len(items))
	for i, it := range items {
		f, err := dec(it)
		if err != nil || len(f) == 0 {
			return nil, fmt.Errorf("redis: bad insert record")
		}
		switch f[0] {
		case "Q":
			if len(f) < 3 {
				return nil, fmt.Errorf("redis: bad insert record")
			}
			out[i].Err = &sluicetype.QuarantinedError{Verb: "insert", ID: f[1], Fingerprint: f[2]}
		case "C":
			if len(f) < 2 {
				return nil, fmt.Errorf("redis: bad insert record")
			}
			out[i].Err = fmt.Errorf("insert job %s: %w: the id exists with other content", f[1], sluicetype.ErrConflict)
		default:
			if len(f) < 2 || len(f[1]) == 0 {
				return nil, fmt.Errorf("redis: bad insert record")
			}
			j, err := recordJob(f[1][1:])
			if err != nil {
				return nil, err
			}
			out[i].Job, out[i].Existing = j, f[0] == "E"
		}
	}
	return out, nil
}

// JobGetByID returns one job or ErrNotFound.
func (s *Store) JobGetByID(ctx context.Context, p *backend.JobGetByIDParams) (*sluicetype.Job, error) {
	js, err := s.getJobs(ctx, []string{p.ID}, p.IncludePayload, false)
	if err != nil {
		return nil, err
	}
	if js[0] == nil {
		return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
	}
	return js[0], nil
}

// getJobs reads jobs by id in one round trip (nil for a missing one);
// lastError keeps only the latest error entry.
func (s *Store) getJobs(ctx context.Context, ids []string, payload, lastError bool) ([]*sluicetype.Job, error) {
	jobs, _, err := s.readJobs(ctx, ids, payload, lastError)
	return jobs, err
}

// readJobs reads jobs by id in one round trip: each job (nil for a
// missing one) and the hash it was decoded from, for callers that need
// fields beyond the job (the filter rows of list.go).
func (s *Store) readJobs(ctx context.Context, ids []string, payload, lastError bool) ([]*sluicetype.Job, []map[string]string, error) {
	jobs := make([]*sluicetype.Job, len(ids))
	hashes := make([]map[string]string, len(ids))
	if len(ids) == 0 {
		return jobs, hashes, nil
	}
	pipe := s.c.Pipeline()
	hs := make([]*goredis.MapStringStringCmd, len(ids))
	es := make([]*goredis.StringSliceCmd, len(ids))
	for i, id := range ids {
		hs[i] = pipe.HGetAll(ctx, s.Key("job", id))
		if lastError {
			es[i] = pipe.LRange(ctx, s.Key("err", id), -1, -1)
		} else {
			es[i] = pipe.LRange(ctx, s.Key("err", id), 0, -1)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, nil, fmt.Errorf("redis: read jobs: %w", err)
	}
	for i := range ids {
		m := hs[i].Val()
		if len(m) == 0 {
			continue
		}
		if !payload {
			delete(m, "p")
		}
		j, err := jobFrom(m, es[i].Val())
		if err != nil {
			return nil, nil, fmt.Errorf("redis: %w", err)
		}
		jobs[i], hashes[i] = j, m
	}
	return jobs, hashes, nil
}

// JobEventList returns a job's stored timeline events, oldest first.
func (s *Store) JobEventList(ctx context.Context, p *backend.JobEventListParams) ([]sluicetype.Event, error) {
	vs, err := s.c.LRange(ctx, s.Key("ev", p.JobID), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: events of job %s: %w", p.JobID, err)
	}
	out := make([]sluicetype.Event, 0, len(vs))
	for _, v := range vs {
		out = append(out, eventFrom(p.JobID, v))
	}
	return out, nil
}

// JobClaim archives the queue's available jobs past their deadline, then
// moves up to Limit available jobs to running under a new lease, in one
// script.
func (s *Store) JobClaim(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	if p.Limit > claimChunk {
		return s.claimChunked(ctx, p)
	}
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	kinds := make([]string, 0, len(p.Kinds))
	for k, v := range p.Kinds {
		kinds = append(kinds, k+"="+strconv.Itoa(v))
	}
	sort.Strings(kinds)
	pd := &p.PastDeadline
	rt, rk := claimRoutes(pd)
	v, err := s.run(ctx, "claim "+p.Queue, luaClaim,
		"queue", p.Queue, "worker", p.WorkerID, "lease", p.LeaseID, "limit", strconv.Itoa(p.Limit),
		"suspects", strconv.Itoa(p.Suspects), "lone", flag(p.Lone), "dur", dstr(lease),
		"kinds", strings.Join(kinds, us),
		"pd_to", string(pd.To), "pd_reason", string(pd.Reason), "pd_le", pd.LastError, "pd_ep", pd.Pattern,
		"ev_kind", string(pd.Event.Kind), "ev_actor", pd.Event.Actor, "ev_from", string(pd.Event.From),
		"ev_to", string(pd.Event.To), "ev_msg", pd.Event.Message, "rt", rt, "rk", rk)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	if len(r) != 4 {
		return nil, fmt.Errorf("redis: claim %s: bad reply", p.Queue)
	}
	now, _ := r[0].(string)
	res := &backend.JobClaimResult{Now: ttime(now)}
	// Claimed jobs come packed; a claim that returns early (a paused
	// queue) sends a plain empty array.
	var jobs []*sluicetype.Job
	if packed, ok := r[1].(string); ok {
		if jobs, err = unpackJobs(packed, true); err != nil {
			return nil, fmt.Errorf("redis: claim %s: %w", p.Queue, err)
		}
	}
	dead, _ := r[2].([]any)
	// The script sends each job as it read it; its writes are these, the
	// same for every job (see luaClaim).
	exp := ttime(tadd(now, lease))
	for _, j := range jobs {
		j.State = sluicetype.StateRunning
		j.Fence++
		j.Version++
		j.Lease = &sluicetype.Lease{ID: p.LeaseID, WorkerID: p.WorkerID, Fence: j.Fence, ExpiresAt: exp}
		at := res.Now
		j.AttemptedAt = &at
		j.AttemptedBy = p.WorkerID
		j.StateChangedAt = res.Now
		res.Jobs = append(res.Jobs, j)
	}
	for _, x := range dead {
		j, err := jobReply(x, true)
		if err != nil {
			return nil, err
		}
		res.Dead = append(res.Dead, j)
	}
	if err := s.claimDeadLetters(ctx, pd, r[3], res); err != nil {
		// The claimed jobs are leased now: hand them out. The deaths not
		// written stay available past their deadline for the next claim.
		s.log.Warn("claim: deadline deaths not written", "queue", p.Queue, "err", err)
	}
	return res, nil
}

// claimChunked claims up to p.Limit jobs as claims of at most claimChunk
// each, as one claim would take them: each chunk takes never-crashed jobs
// first, then suspects up to what the earlier chunks left of p.Suspects; a
// chunk short of its limit means the queue has no more for this claim.
// The lone job is asked for only by the first chunk (a later one follows
// a full chunk). Now is the first chunk's, so a lease is never later than
// Now plus the lease duration says.
func (s *Store) claimChunked(ctx context.Context, p *backend.JobClaimParams) (*backend.JobClaimResult, error) {
	var res *backend.JobClaimResult
	left, suspects, lone := p.Limit, p.Suspects, p.Lone
	for left > 0 {
		q := *p
		q.Limit, q.Suspects, q.Lone = min(left, claimChunk), min(suspects, min(left, claimChunk)), lone
		r, err := s.JobClaim(ctx, &q)
		if err != nil {
			if res != nil && len(res.Jobs) > 0 {
				// The jobs already claimed are the caller's: they are
				// handed over, not left running unseen until their lease
				// expires.
				return res, nil
			}
			return nil, err
		}
		if res == nil {
			res = r
		} else {
			res.Jobs = append(res.Jobs, r.Jobs...)
			res.Dead = append(res.Dead, r.Dead...)
		}
		for _, j := range r.Jobs {
			if j.CrashAttempt == 1 {
				suspects--
			}
		}
		if len(r.Jobs) < q.Limit {
			break
		}
		left -= len(r.Jobs)
		lone = false
	}
	return res, nil
}

// JobCompleteMany completes (or deletes) successful jobs in one script
// (of at most completeChunk items each); each item is fenced on its own.
func (s *Store) JobCompleteMany(ctx context.Context, p *backend.JobCompleteManyParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	if len(p.Items) > completeChunk {
		for i := 0; i < len(p.Items); i += completeChunk {
			q := *p
			q.Items = p.Items[i:min(i+completeChunk, len(p.Items))]
			r, err := s.JobCompleteMany(ctx, &q)
			if err != nil {
				return nil, err
			}
			copy(out[i:], r)
		}
		return out, nil
	}
	args := make([]any, 0, 1+4*len(p.Items))
	args = append(args, flag(p.EndProbation))
	for _, it := range p.Items {
		args = append(args, it.ID, it.LeaseID, strconv.FormatInt(it.Fence, 10), flag(it.Delete))
	}
	v, err := s.run(ctx, "complete jobs", luaComplete, args...)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	for i := range p.Items {
		if ok, _ := at(r, i).(int64); ok != 1 {
			out[i] = fmt.Errorf("complete job %s: %w", p.Items[i].ID, sluicetype.ErrLeaseLost)
		}
	}
	return out, nil
}

// JobFinish applies one fenced transition out of running, as the engine
// resolved it, in one script.
func (s *Store) JobFinish(ctx context.Context, p *backend.JobFinishParams) (*sluicetype.Job, error) {
	if p.To == sluicetype.StateRunning || (p.To != sluicetype.StateDeleted && !p.To.Valid()) {
		return nil, fmt.Errorf("finish job %s: %w: cannot go to %q", p.ID, sluicetype.ErrInvalidTransition, p.To)
	}
	ifBefore := ""
	if !p.IfBefore.IsZero() {
		ifBefore = tstr(p.IfBefore)
	}
	charge := ""
	switch p.Charge {
	case backend.ChargeAttempt:
		charge = "attempt"
	case backend.ChargeCrash:
		charge = "crash"
	}
	sched := "keep"
	switch p.Schedule {
	case backend.ScheduleNow:
		sched = "now"
	case backend.ScheduleAfter:
		sched = "after"
	}
	a := []any{"id", p.ID, "lease", p.LeaseID, "fence", strconv.FormatInt(p.Fence, 10),
		"ifexp", flag(p.IfLeaseExpired), "ifgone", flag(p.IfWorkerGone), "ifbefore", ifBefore,
		"to", string(p.To), "reason", string(p.Reason), "charge", charge, "sched", sched, "delay", dstr(p.Delay),
		"fin", flag(p.Finalize)}
	if e := p.Error; e != nil {
		entry, err := errorEntry(e.Entry)
		if err != nil {
			return nil, fmt.Errorf("redis: finish job %s: error entry: %w", p.ID, err)
		}
		a = append(a, "err", "1", "err_entry", entry, "err_keep", strconv.Itoa(e.Keep), "err_le", e.LastError, "err_ep", e.Pattern)
	}
	if w := p.Event; w != nil {
		a = append(a, "ev", "1", "ev_kind", string(w.Kind), "ev_actor", w.Actor, "ev_from", string(w.From),
			"ev_to", string(w.To), "ev_att", strconv.Itoa(w.Attempt), "ev_msg", w.Message)
	}
	a = append(a, "counts", countsArg(p.Counts))
	if f := p.Fingerprint; f != nil && f.Fingerprint != "" {
		a = append(a, "fp", "1", "fp_fp", f.Fingerprint, "fp_kind", f.Kind, "fp_add", strconv.Itoa(f.AddCrashes),
			"fp_quar", flag(f.Quarantine), "fp_le", f.LastError, "fp_lj", f.LastJobID)
		if h := f.Hold; h != nil {
			a = append(a, "h", "1", "h_from", joinStates(h.From), "h_to", string(h.To), "h_reason", string(h.Reason),
				"h_kind", string(h.Event.Kind), "h_actor", h.Event.Actor, "h_msg", h.Event.Message)
		}
	}
	a = append(a, finishWorkflowArgs(p)...)
	v, err := s.run(ctx, "finish job "+p.ID, luaFinish, a...)
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "LEASE" {
			switch {
			case r.arg == "bound":
				return nil, fmt.Errorf("finish job %s: the write came after its bound %s: %w", p.ID, p.IfBefore.Format(time.RFC3339Nano), sluicetype.ErrLeaseLost)
			case r.arg == "renewed":
				return nil, fmt.Errorf("finish job %s: lease renewed: %w", p.ID, sluicetype.ErrLeaseLost)
			case strings.HasPrefix(r.arg, "alive "):
				return nil, fmt.Errorf("finish job %s: worker %s beats again: %w", p.ID, strings.TrimPrefix(r.arg, "alive "), sluicetype.ErrLeaseLost)
			}
			return nil, fmt.Errorf("finish job %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		return nil, err
	}
	if arr, _ := v.([]any); len(arr) == 0 {
		return nil, nil
	}
	return jobReply(v, true)
}

// at is arr[i], or nil past its end.
func at(arr []any, i int) any {
	if i < len(arr) {
		return arr[i]
	}
	return nil
}

// countsArg encodes a plan's counter deltas for a script.
func countsArg(ds []backend.CountDelta) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString("\x1e")
		}
		from := string(d.From)
		b.WriteString(d.Queue + us + from + us + string(d.To) + us + strconv.FormatInt(d.N, 10))
	}
	return b.String()
}

// JobLeaseRenew extends leases; each item is fenced on its own.
func (s *Store) JobLeaseRenew(ctx context.Context, p *backend.JobLeaseRenewParams) ([]error, error) {
	out := make([]error, len(p.Items))
	if len(p.Items) == 0 {
		return out, nil
	}
	lease := p.LeaseDuration
	if lease <= 0 {
		lease = defaultLease
	}
	args := make([]any, 0, 1+3*len(p.Items))
	args = append(args, dstr(lease))
	for _, it := range p.Items {
		args = append(args, it.ID, it.LeaseID, strconv.FormatInt(it.Fence, 10))
	}
	v, err := s.run(ctx, "renew leases", luaRenew, args...)
	if err != nil {
		return nil, err
	}
	r, _ := v.([]any)
	for i, it := range p.Items {
		if ok, _ := at(r, i).(int64); ok != 1 {
			out[i] = fmt.Errorf("renew lease of job %s: %w", it.ID, sluicetype.ErrLeaseLost)
		}
	}
	return out, nil
}

// JobListExpiredLeases lists running jobs whose lease has expired, oldest
// expiry first, with whether their worker still heartbeats.
func (s *Store) JobListExpiredLeases(ctx context.Context, p *backend.JobListExpiredLeasesParams) ([]backend.ExpiredLease, error) {
	now, err := s.Now(ctx)
	if err != nil {
		return nil, err
	}
	nowS := tstr(now)
	by := &goredis.ZRangeBy{Min: "-", Max: "(" + nowS}
	if p.Limit > 0 {
		by.Count = int64(p.Limit)
	}
	ms, err := s.c.ZRangeByLex(ctx, s.Key("run"), by).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: expired leases: %w", err)
	}
	ids := memberIDs(ms)
	js, err := s.getJobs(ctx, ids, false, false)
	if err != nil {
		return nil, err
	}
	var out []backend.ExpiredLease
	pipe := s.c.Pipeline()
	var alive []*goredis.StringCmd
	for _, j := range js {
		if j == nil || j.State != sluicetype.StateRunning || j.Lease == nil {
			continue
		}
		out = append(out, backend.ExpiredLease{Job: j})
		alive = append(alive, pipe.HGet(ctx, s.Key("w", j.Lease.WorkerID), "x"))
	}
	if len(out) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redis: expired leases: %w", err)
	}
	for i := range out {
		x := alive[i].Val()
		out[i].WorkerAlive = x != "" && x >= nowS
	}
	return out, nil
}

// memberIDs takes the ids out of "TIME:ID" members.
func memberIDs(ms []string) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		if len(m) > 20 {
			out[i] = m[20:]
		}
	}
	return out
}

// JobScheduleDue moves due scheduled and retryable jobs to available.
func (s *Store) JobScheduleDue(ctx context.Context, p *backend.JobScheduleDueParams) ([]string, error) {
	if p.To == "" {
		return nil, fmt.Errorf("schedule due: %w: no target state", sluicetype.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	v, err := s.run(ctx, "schedule due", luaScheduleDue, string(p.To), strconv.Itoa(limit), joinStates(p.From))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, q := range strs(v) {
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	sort.Strings(out)
	if len(out) > 0 {
		s.publishWake(ctx, out...)
	}
	return out, nil
}

// JobDeleteExpired deletes terminal jobs past their retention, at most
// Limit, in one script.
func (s *Store) JobDeleteExpired(ctx context.Context, p *backend.JobDeleteExpiredParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	overriding := map[sluicetype.State][]string{}
	queues := make([]string, 0, len(p.QueueRetention))
	for q, m := range p.QueueRetention {
		queues = append(queues, q)
		for state := range m {
			overriding[state] = append(overriding[state], q)
		}
	}
	sort.Strings(queues)
	args := []any{strconv.Itoa(limit)}
	add := func(st sluicetype.State, d time.Duration, q string, excl []string) {
		if !st.Terminal() || d < 0 {
			return
		}
		args = append(args, string(st), dstr(d), q, strings.Join(excl, us))
	}
	for _, st := range sluicetype.AllStates {
		if d, ok := p.Retention[st]; ok {
			add(st, d, "", overriding[st])
		}
	}
	for _, q := range queues {
		m := p.QueueRetention[q]
		for _, st := range sluicetype.AllStates {
			if d, ok := m[st]; ok {
				add(st, d, q, nil)
			}
		}
	}
	if len(args) == 1 {
		return 0, nil
	}
	v, err := s.run(ctx, "delete expired jobs", luaDeleteExpired, args...)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return int(n), nil
}

func jsonStrings(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}
