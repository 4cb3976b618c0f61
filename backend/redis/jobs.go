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

// The arguments of luaInsert: a head, then one record per job
// (batchLayout).
const (
	insRefuse = iota // "1" to refuse quarantined fingerprints
	insHeadLen
)

const (
	insID            = iota
	insQueue         //
	insKind          //
	insPayload       //
	insSchemaVersion //
	insMetadata      //
	insTags          // JSON
	insPriority      //
	insMaxAttempts   //
	insFingerprint   //
	insScheduledAt   // a time, or "" for now plus the delay
	insDelay         // "s:ns"
	insDeadline      // a time or ""
	insTimeout       // nanoseconds
	insRecLen
)

// insertLayout names luaInsert's arguments for the script.
func insertLayout() batchLayout {
	var h [insHeadLen]string
	h[insRefuse] = "refuse"
	var r [insRecLen]string
	r[insID], r[insQueue], r[insKind], r[insPayload] = "id", "queue", "kind", "payload"
	r[insSchemaVersion], r[insMetadata], r[insTags], r[insPriority] = "schema_version", "metadata", "tags", "priority"
	r[insMaxAttempts], r[insFingerprint], r[insScheduledAt] = "max_attempts", "fingerprint", "scheduled_at"
	r[insDelay], r[insDeadline], r[insTimeout] = "delay", "deadline", "timeout"
	return batchLayout{head: h[:], rec: r[:]}
}

// luaInsert writes new jobs (JobInsertMany).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, claim token and step (luaLib)
// ARGV[4] -> A.refuse: "1" to refuse quarantined fingerprints
// ARGV[R1...] -> one record of RN values per job, at the offsets R names
// (insertLayout: id, queue, kind, payload, schema_version, metadata,
// tags, priority, max_attempts, fingerprint, scheduled_at, delay,
// deadline, timeout)
//
// Returns {now, results}, one result per job: {"N", state, scheduled_at}
// written (every other field is the job as sent, as of now: JobInsertMany
// builds the job from its record rather than have the script send back
// what it was sent), {"E", job} existing with the same content, {"C"}
// existing with other content, {"Q"} refused as quarantined.
//
// The index entries of the new jobs are gathered (ZB) and written once
// per key for the batch; fingerprints are looked up only when quarantine
// records exist.
var luaInsert = batchScript(insertLayout(), `
local refuse = A.refuse == '1' and redis.call('SCARD', K('fprs')) > 0
ZB = {}
local res, recs, due, idsk = {}, {}, {}, K('ids')
for i = R1, #ARGV, RN do
  local id, q, k, fp = ARGV[i + R.id], ARGV[i + R.queue], ARGV[i + R.kind], ARGV[i + R.fingerprint]
  local r
  if refuse and quarantined(fp) then
    r = {'Q'}
    recs[#recs + 1] = enc({'Q', id, fp})
  else
    local O = load(id)
    if O then
      if O[F.queue] ~= q or O[F.kind] ~= k or O[F.fingerprint] ~= fp then
        r = {'C'}
        recs[#recs + 1] = enc({'C', id})
      else
        r = {'E', out(O, false)}
        if IK ~= '' then recs[#recs + 1] = enc({'E', rec(O, false)}) end
      end
    else
      local sch = ARGV[i + R.scheduled_at]
      if sch == '' then
        local d = ARGV[i + R.delay]
        sch = due[d]
        if not sch then sch = tadd(d); due[d] = sch end
      end
      local st = 'available'
      if sch > NOW then st = 'scheduled' end
      local p, sv, m, tg = ARGV[i + R.payload], ARGV[i + R.schema_version], ARGV[i + R.metadata], ARGV[i + R.tags]
      local pr, ma, dl, to = ARGV[i + R.priority], ARGV[i + R.max_attempts], ARGV[i + R.deadline], ARGV[i + R.timeout]
      -- create's writes, spelled out for a new job: its stored fields
      -- (flat's), the ones the claim and the completion look up first;
      -- its index entries (index) and counter.
      local h = {F.state, st, F.version, '1', F.state_changed_at, NOW, F.queue, q, F.kind, k, F.schema_version, sv,
        F.scheduled_at, sch, F.max_attempts, ma, F.created_at, NOW, F.id, id}
      if pr ~= '0' then h[#h + 1] = F.priority; h[#h + 1] = pr end
      if to ~= '0' then h[#h + 1] = F.timeout; h[#h + 1] = to end
      if tg ~= '' and tg ~= '[]' then h[#h + 1] = F.tags; h[#h + 1] = tg end
      if fp ~= '' then h[#h + 1] = F.fingerprint; h[#h + 1] = fp end
      if dl ~= '' then h[#h + 1] = F.deadline; h[#h + 1] = dl end
      if m ~= '' then h[#h + 1] = F.metadata; h[#h + 1] = m end
      if p ~= '' then h[#h + 1] = F.payload; h[#h + 1] = p end
      redis.call('HSET', P .. 'job:' .. id, unpack(h))
      zlex(true, idsk, id)
      if not QSEEN[q] then redis.call('SADD', K('queues'), q); QSEEN[q] = true end
      if fp ~= '' then redis.call('SADD', K('fpj', fp), id) end
      local sm = NOW .. ':' .. id
      if st == 'available' then
        zlex(true, pairkey(st, q, k), sm)
        zset(true, K('av', q, '0'), pr, sch .. ':' .. id)
        if dl ~= '' then zlex(true, K('dl', q), dl .. ':' .. id) end
      else
        zlex(true, K('st', st), sm)
        zlex(true, K('sq', st, q), sm)
        zlex(true, K('sk', st, k), sm)
        zlex(true, K('due', st), sch .. ':' .. id)
      end
      count(q, st, 1)
      r = {'N', st, sch}
      if IK ~= '' then
        local J = {[F.id] = id, [F.queue] = q, [F.kind] = k, [F.payload] = p, [F.schema_version] = sv,
          [F.metadata] = m, [F.tags] = tg, [F.priority] = pr, [F.state] = st, [F.attempt] = '0',
          [F.max_attempts] = ma, [F.crash_attempt] = '0', [F.fingerprint] = fp, [F.fence] = '0',
          [F.scheduled_at] = sch, [F.deadline] = dl, [F.timeout] = to, [F.created_at] = NOW,
          [F.state_changed_at] = NOW, [F.version] = '1'}
        recs[#recs + 1] = enc({'N', rec(J, false)})
      end
    end
  end
  res[#res + 1] = r
end
idem_record('I' .. enc(recs))
return {NOW, res}
`)

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
	var head [insHeadLen]string
	head[insRefuse] = flag(p.RefuseQuarantined)
	args := appendArgs(make([]any, 0, insHeadLen+insRecLen*len(p.Jobs)), head[:]...)
	var idx []int
	recs := make([][insRecLen]string, 0, len(p.Jobs))
	for i, jp := range p.Jobs {
		if jp == nil || jp.ID == "" {
			res[i].Err = fmt.Errorf("redis: insert job: %w: no id", sluicetype.ErrInvalid)
			continue
		}
		idx = append(idx, i)
		recs = append(recs, insertRec(jp))
		args = appendArgs(args, recs[len(recs)-1][:]...)
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
			res[i].Err = &sluicetype.IDTakenError{ID: jp.ID}
		case "E":
			j, err := jobReply(at(r, 1), false)
			if err != nil {
				return nil, err
			}
			res[i].Job, res[i].Existing = j, true
		case "N":
			st, _ := at(r, 1).(string)
			sch, _ := at(r, 2).(string)
			j, err := jobFrom(insertedFields(&recs[n], st, sch, now), nil)
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

// insertRec is a job's record of luaInsert's arguments.
func insertRec(jp *backend.JobInsertParams) [insRecLen]string {
	var r [insRecLen]string
	r[insID], r[insQueue], r[insKind], r[insPayload] = jp.ID, jp.Queue, jp.Kind, string(jp.Payload)
	r[insSchemaVersion], r[insMetadata] = strconv.Itoa(jp.SchemaVersion), string(jp.Metadata)
	r[insTags] = "[]"
	if len(jp.Tags) > 0 {
		r[insTags] = jsonStrings(jp.Tags)
	}
	r[insPriority], r[insMaxAttempts], r[insFingerprint] = strconv.Itoa(jp.Priority), strconv.Itoa(jp.MaxAttempts), jp.Fingerprint
	if jp.ScheduledAt != nil {
		r[insScheduledAt] = tstr(*jp.ScheduledAt)
	}
	r[insDelay], r[insDeadline], r[insTimeout] = dstr(jp.Delay), tptr(jp.Deadline), strconv.FormatInt(int64(jp.Timeout), 10)
	return r
}

// insertedFields is the hash luaInsert wrote for a new job (without its
// payload, as its reply had it), from the record JobInsertMany sent for
// it and the state, scheduled_at and now the script answered.
func insertedFields(r *[insRecLen]string, state, sched, now string) map[string]string {
	return map[string]string{fID: r[insID], fQueue: r[insQueue], fKind: r[insKind],
		fSchemaVersion: r[insSchemaVersion], fMetadata: r[insMetadata], fTags: r[insTags], fPriority: r[insPriority],
		fState: state, fAttempt: "0", fMaxAttempts: r[insMaxAttempts], fCrashAttempt: "0",
		fFingerprint: r[insFingerprint], fFence: "0", fScheduledAt: sched, fDeadline: r[insDeadline],
		fTimeout: r[insTimeout], fCreatedAt: now, fStateChangedAt: now, fVersion: "1"}
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
			out[i].Err = &sluicetype.IDTakenError{ID: f[1]}
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
			delete(m, fPayload)
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
		e, err := eventFrom(p.JobID, v)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// The arguments of luaComplete: a head, then one record per item
// (batchLayout).
const (
	cmpProbation = iota // "1" to end the probation of each completed job's fingerprint
	cmpHeadLen
)

const (
	cmpID     = iota
	cmpLease  // lease id
	cmpFence  //
	cmpDelete // "1" to delete the job instead
	cmpRecLen
)

// completeLayout names luaComplete's arguments for the script.
func completeLayout() batchLayout {
	var h [cmpHeadLen]string
	h[cmpProbation] = "probation"
	var r [cmpRecLen]string
	r[cmpID], r[cmpLease], r[cmpFence], r[cmpDelete] = "id", "lease", "fence", "delete"
	return batchLayout{head: h[:], rec: r[:]}
}

// luaComplete finishes successful jobs (JobCompleteMany).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4] -> A.probation: "1" to end the probation of each completed
// job's fingerprint
// ARGV[R1...] -> one record of RN values per item, at the offsets R names
// (completeLayout: id, lease, fence, delete)
//
// Returns one integer per item: 1 applied, 0 lease lost.
var luaComplete = batchScript(completeLayout(), `
-- Probation records are looked for only when quarantine records exist.
local probe = A.probation == '1' and redis.call('SCARD', K('fprs')) > 0
local res, fps = {}, {}
-- Index writes other than the fast path's own (error groups, deleted
-- jobs) are gathered (ZB) and written once per key, as the claim's.
ZB = {}
-- The fast path: a job leaves one index entry (run) and gets one (its
-- queue and kind's sqk of completed); they are written per batch, one
-- call per index. A job with an error pattern also moves its error
-- group's entries from running to completed (gathered, ZB). A job deleted
-- on completion takes the general path.
local runm, sqk, nq = {}, {}, {}
for i = R1, #ARGV, RN do
  local id = ARGV[i + R.id]
  local key = K('job', id)
  local h
  if probe then h = redis.call('HMGET', key, F.state, F.lease_id, F.fence, F.lease_expires, F.queue, F.kind,
    F.version, F.pattern, F.state_changed_at, F.fingerprint)
  else h = redis.call('HMGET', key, F.state, F.lease_id, F.fence, F.lease_expires, F.queue, F.kind, F.version,
    F.pattern, F.state_changed_at) end
  if h[1] == 'running' and h[2] == ARGV[i + R.lease] and h[3] == ARGV[i + R.fence] then
    if ARGV[i + R.delete] == '1' then
      remove(load(id), true)
    else
      local q = h[5]
      redis.call('HSET', key, F.state, 'completed', F.finalized_at, NOW, F.state_changed_at, NOW, F.version,
        inc(h[7]))
      redis.call('HDEL', key, F.lease_id, F.lease_worker, F.lease_expires)
      runm[#runm + 1] = h[4] .. ':' .. id
      local m = NOW .. ':' .. id
      group(sqk, q .. US .. h[6], m)
      if h[8] then egmove('running', 'completed', q, h[6], h[8], id, (h[9] or '') .. ':' .. id, m) end
      nq[q] = (nq[q] or 0) + 1
    end
    if probe and h[10] then fps[h[10]] = true end
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
if #runm > 0 then
  zmany(false, K('run'), runm)
  for pk, ms in pairs(sqk) do zmany(true, K('sqk', 'completed', pk), ms) end
  for q, n in pairs(nq) do count(q, 'running', -n); count(q, 'completed', n) end
end
if probe then
  for fp in pairs(fps) do
    if redis.call('HGET', K('fpr', fp), QF.status) == 'probation' then
      redis.call('DEL', K('fpr', fp))
      redis.call('SREM', K('fprs'), fp)
    end
  end
end
return res
`)

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
	var head [cmpHeadLen]string
	head[cmpProbation] = flag(p.EndProbation)
	args := appendArgs(make([]any, 0, cmpHeadLen+cmpRecLen*len(p.Items)), head[:]...)
	for _, it := range p.Items {
		var r [cmpRecLen]string
		r[cmpID], r[cmpLease], r[cmpFence], r[cmpDelete] = it.ID, it.LeaseID, strconv.FormatInt(it.Fence, 10), flag(it.Delete)
		args = appendArgs(args, r[:]...)
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

// at is arr[i], or nil past its end.
func at(arr []any, i int) any {
	if i < len(arr) {
		return arr[i]
	}
	return nil
}

// The arguments of luaRenew: a head, then one record per item
// (batchLayout).
const (
	rnwDuration = iota // the lease duration ("s:ns")
	rnwHeadLen
)

const (
	rnwID    = iota
	rnwLease // lease id
	rnwFence //
	rnwRecLen
)

// renewLayout names luaRenew's arguments for the script.
func renewLayout() batchLayout {
	var h [rnwHeadLen]string
	h[rnwDuration] = "duration"
	var r [rnwRecLen]string
	r[rnwID], r[rnwLease], r[rnwFence] = "id", "lease", "fence"
	return batchLayout{head: h[:], rec: r[:]}
}

// luaRenew extends leases (JobLeaseRenew).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4] -> A.duration: the lease duration ("s:ns")
// ARGV[R1...] -> one record of RN values per item, at the offsets R names
// (renewLayout: id, lease, fence)
//
// Returns one integer per item: 1 renewed, 0 lease lost.
//
// A running job is only in the lease set (run) and, with an error
// pattern, its error group's sets, whose members a renewal leaves as they
// are: it reads the five fields it checks and writes two, and the lease
// set's entries move once per batch.
var luaRenew = batchScript(renewLayout(), `
local exp = tadd(A.duration)
local res, old, new = {}, {}, {}
for i = R1, #ARGV, RN do
  local id = ARGV[i + R.id]
  local key = P .. 'job:' .. id
  local h = redis.call('HMGET', key, F.state, F.lease_id, F.fence, F.lease_expires, F.version)
  if h[1] == 'running' and h[2] == ARGV[i + R.lease] and h[3] == ARGV[i + R.fence] then
    redis.call('HSET', key, F.lease_expires, exp, F.version, inc(h[5]))
    old[#old + 1] = (h[4] or '') .. ':' .. id
    new[#new + 1] = exp .. ':' .. id
    res[#res + 1] = 1
  else
    res[#res + 1] = 0
  end
end
zmany(false, K('run'), old)
zmany(true, K('run'), new)
return res
`)

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
	var head [rnwHeadLen]string
	head[rnwDuration] = dstr(lease)
	args := appendArgs(make([]any, 0, rnwHeadLen+rnwRecLen*len(p.Items)), head[:]...)
	for _, it := range p.Items {
		var r [rnwRecLen]string
		r[rnwID], r[rnwLease], r[rnwFence] = it.ID, it.LeaseID, strconv.FormatInt(it.Fence, 10)
		args = appendArgs(args, r[:]...)
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
		alive = append(alive, pipe.HGet(ctx, s.Key("w", j.Lease.WorkerID), wExpires))
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

// luaScheduleDue moves scheduled and retryable jobs whose time has come to
// available (JobScheduleDue).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.to -> the target state
// A.limit -> the most jobs to move
// A.from -> the from-states in order, joined by US
//
// Returns the queues that got work (with repeats).
//
// The index writes are gathered (ZB): each index key is written once for
// the batch. Each due set is read once, before any of them is written.
var luaScheduleDue = script(`
local A = args(4)
ZB = {}
local to, limit = A.to, tonumber(A.limit)
local moved, queues = 0, {}
for _, from in ipairs(split(A.from)) do
  if moved >= limit then break end
  local ms = redis.call('ZRANGEBYLEX', K('due', from), '-', '(' .. NOW1, 'LIMIT', 0, limit - moved)
  for _, m in ipairs(ms) do
    local J = load(string.sub(m, 21))
    if J and J[F.state] == from then
      local O = copy(J)
      J[F.state] = to; J[F.state_changed_at] = NOW
      bump(J)
      commit(O, J, true)
      moved = moved + 1
      queues[#queues + 1] = J[F.queue]
    end
  end
end
return queues
`)

// JobScheduleDue moves due scheduled and retryable jobs to available.
func (s *Store) JobScheduleDue(ctx context.Context, p *backend.JobScheduleDueParams) ([]string, error) {
	if p.To == "" {
		return nil, fmt.Errorf("schedule due: %w: no target state", sluicetype.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	v, err := s.run(ctx, "schedule due", luaScheduleDue, "to", string(p.To), "limit", strconv.Itoa(limit),
		"from", joinStates(p.From))
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

// The arguments of luaDeleteExpired: a head, then one record per sweep
// (batchLayout).
const (
	dexLimit = iota // the most jobs to delete
	dexHeadLen
)

const (
	dexState     = iota // a terminal state
	dexRetention        // "s:ns"; "0:0" deletes everything
	dexQueue            // "" for every queue but the ones excluded
	dexExcluded         // queues excluded, joined by US
	dexRecLen
)

// deleteExpiredLayout names luaDeleteExpired's arguments for the script.
func deleteExpiredLayout() batchLayout {
	var h [dexHeadLen]string
	h[dexLimit] = "limit"
	var r [dexRecLen]string
	r[dexState], r[dexRetention], r[dexQueue], r[dexExcluded] = "state", "retention", "queue", "excluded"
	return batchLayout{head: h[:], rec: r[:]}
}

// luaDeleteExpired deletes terminal jobs past their retention
// (JobDeleteExpired).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4] -> A.limit: the most jobs to delete
// ARGV[R1...] -> one record of RN values per sweep, at the offsets R
// names (deleteExpiredLayout: state, retention, queue, excluded)
//
// Returns how many jobs were deleted.
var luaDeleteExpired = batchScript(deleteExpiredLayout(), `
local limit = tonumber(A.limit)
local total = 0
for i = R1, #ARGV, RN do
  if total >= limit then break end
  local st, ret, q = ARGV[i + R.state], ARGV[i + R.retention], ARGV[i + R.queue]
  local excl = set(split(ARGV[i + R.excluded]))
  local cut = NOW1
  if ret ~= '0:0' then
    local c = string.find(ret, ':', 1, true)
    local s, ns = -tonumber(string.sub(ret, 1, c - 1)), -tonumber(string.sub(ret, c + 1))
    if ns < 0 then ns = ns + 1000000000; s = s - 1 end
    cut = tadd(istr(s) .. ':' .. istr(ns))
  end
  -- A state without st (NOST) is walked by its queue and kind sets, the
  -- excluded queues (which have retentions of their own) left out.
  local keys = {K('st', st)}
  if NOST[st] then
    keys = {}
    for _, pk in ipairs(redis.call('SMEMBERS', K('qk'))) do
      local qq = split(pk)[1]
      if (q == '' or qq == q) and not excl[qq] then keys[#keys + 1] = K('sqk', st, pk) end
    end
  elseif q ~= '' then keys = {K('sq', st, q)} end
  for _, key in ipairs(keys) do
    local skipped = 0
    while total < limit do
      local ms = redis.call('ZRANGEBYLEX', key, '-', '(' .. cut, 'LIMIT', skipped, math.min(500, limit - total + 50))
      if #ms == 0 then break end
      for _, m in ipairs(ms) do
        if total >= limit then break end
        local J = load(string.sub(m, 21))
        if J and J[F.state] == st and not excl[J[F.queue]] and J[F.finalized_at] ~= '' and J[F.finalized_at] < cut then
          remove(J, true)
          total = total + 1
        else
          skipped = skipped + 1
        end
      end
    end
  end
end
return total
`)

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
	var head [dexHeadLen]string
	head[dexLimit] = strconv.Itoa(limit)
	args := appendArgs(nil, head[:]...)
	add := func(st sluicetype.State, d time.Duration, q string, excl []string) {
		if !st.Terminal() || d < 0 {
			return
		}
		var r [dexRecLen]string
		r[dexState], r[dexRetention], r[dexQueue], r[dexExcluded] = string(st), dstr(d), q, strings.Join(excl, us)
		args = appendArgs(args, r[:]...)
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
	if len(args) == dexHeadLen {
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
