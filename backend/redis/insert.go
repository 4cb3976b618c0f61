package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Inserts: a batch of new jobs, a chunk a script.

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
	insUniqueKey     // "" for none
	insUniqueStates  // the mask, decimal
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
	r[insUniqueKey], r[insUniqueStates] = "unique_key", "unique_states"
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
// deadline, timeout, unique_key, unique_states)
//
// Returns {now, results}, one result per job: {"N", state, scheduled_at}
// written (every other field is the job as sent, as of now: JobInsertMany
// builds the job from its record rather than have the script send back
// what it was sent), {"E", job} existing with the same content, {"C"}
// existing with other content, {"Q"} refused as quarantined. A job whose
// id is new but whose unique key another job holds (uholder) answers
// {"E", holder}; a new unique job takes its key ({ns}:uq:KEY), in the
// same script, so no other insert can see it free.
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
    local uk = ARGV[i + R.unique_key]
    local hid = nil
    if not O and uk ~= '' then hid = uholder(uk) end
    if hid then
      local H = load(hid)
      r = {'E', out(H, false)}
      if IK ~= '' then recs[#recs + 1] = enc({'E', rec(H, false)}) end
    elseif O then
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
      local us = ARGV[i + R.unique_states]
      if uk ~= '' then
        h[#h + 1] = F.unique_key; h[#h + 1] = uk; h[#h + 1] = F.unique_states; h[#h + 1] = us
        redis.call('SET', K('uq', uk), id)
        redis.call('SADD', K('ukj', uk), id)
        redis.call('SADD', K('ukjobs'), id)
      end
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
          [F.state_changed_at] = NOW, [F.version] = '1', [F.unique_key] = uk}
        if uk ~= '' then J[F.unique_states] = us end
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
	// Under an idempotency key the whole insert is one recorded step, and
	// with an audit record one recorded action, so it stays one script.
	_, idem := backend.IdempotencyWriteFrom(ctx)
	_, audited := backend.AuditWriteFrom(ctx)
	if len(p.Jobs) > insertChunk && !idem && !audited {
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
	r[insUniqueKey], r[insUniqueStates] = jp.UniqueKey, strconv.FormatInt(jp.UniqueStates, 10)
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
		fTimeout: r[insTimeout], fCreatedAt: now, fStateChangedAt: now, fVersion: "1", fUniqueKey: r[insUniqueKey]}
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

func jsonStrings(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}
