package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Bulk operations: persisted, leased, applied batch by batch, each batch
// one script.

const defaultOperationLease = 30 * time.Second

// maxBatchScript is the most jobs one bulk batch script changes, and
// batchScriptBudget the server's time the whole script may take: its walk
// stops at seven eighths of it, its index writes included (see
// luaOpBatch). The budget is measured by the server's clock (TIME), so on
// a loaded machine a script's time includes the time the server waited
// for a core: it then takes fewer jobs. A stall of the machine itself (8
// ms seen here) can still push one past the 10 ms a script may block the
// server (redis_slowlog_ours in scripts/bench deadletter counts them).
const (
	maxBatchScript    = 1000
	batchScriptBudget = 2 * time.Millisecond
)

// A selector with conditions only Go evaluates (goFiltered) is judged
// here, job by job, before its batch's script runs; the script walks as
// far as its budget lets it, a few dozen jobs it writes or a few hundred
// it passes by. Judging the engine's whole window (ten batches of ids)
// each time read about a hundred times the jobs the script then walked:
// a retry by error text on 300,000 archived jobs made no progress in a
// minute (3.3 million job reads). So the window judged follows the walk:
// twice as far as the operation's previous batch got, from
// minVerdictWindow up to the engine's window.
const (
	minVerdictWindow   = 32
	firstVerdictWindow = 128
)

// opRow is an operation hash: the operation and its runner's state.
type opRow struct {
	op     *sluicetype.Operation
	cursor string
	holder string
	fence  int64
}

func opFrom(m map[string]string) (*opRow, error) {
	op := &sluicetype.Operation{
		ID: m["id"], Action: sluicetype.Action(m["act"]), Status: sluicetype.OperationStatus(m["st"]), CreatedBy: m["by"],
		CreatedAt: ttime(m["cr"]), StartedAt: ttimePtr(m["sa"]), FinishedAt: ttimePtr(m["fa"]),
		Matched: atoi64(m["mt"]), Processed: atoi64(m["pc"]), Succeeded: atoi64(m["sc"]), Failed: atoi64(m["fl"]),
		Error: m["er"], Rate: atoi(m["rt"]),
	}
	if sel := m["sel"]; sel != "" {
		if err := json.Unmarshal([]byte(sel), &op.Selector); err != nil {
			return nil, fmt.Errorf("operation %s: selector: %w", op.ID, err)
		}
	}
	return &opRow{op: op, cursor: m["cur"], holder: m["lh"], fence: atoi64(m["lf"])}, nil
}

// OperationInsert persists a new pending operation created now.
func (s *Store) OperationInsert(ctx context.Context, p *backend.OperationInsertParams) (*sluicetype.Operation, error) {
	sel, err := json.Marshal(p.Selector)
	if err != nil {
		return nil, fmt.Errorf("redis: operation %s: selector: %w", p.ID, err)
	}
	v, err := s.run(ctx, "insert operation "+p.ID, luaOpInsert, "id", p.ID, "act", string(p.Action), "sel", string(sel),
		"by", p.CreatedBy, "mt", strconv.FormatInt(p.Matched, 10), "rt", strconv.Itoa(p.Rate))
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "CONFLICT" {
			return nil, fmt.Errorf("insert operation %s: %w: the id exists", p.ID, sluicetype.ErrConflict)
		}
		return nil, err
	}
	r, err := opFrom(fieldMap(v))
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// OperationGet returns one operation or ErrNotFound.
func (s *Store) OperationGet(ctx context.Context, p *backend.OperationGetParams) (*sluicetype.Operation, error) {
	m, err := s.c.HGetAll(ctx, s.Key("op", p.ID)).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: operation %s: %w", p.ID, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrNotFound)
	}
	r, err := opFrom(m)
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// OperationList pages operations newest first by (created_at, id).
func (s *Store) OperationList(ctx context.Context, p *backend.OperationListParams) ([]*sluicetype.Operation, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.DefaultListLimit
	}
	max := "+"
	if p.After != nil {
		max = "(" + member(p.After.At, p.After.ID)
	}
	ms, err := s.c.ZRevRangeByLex(ctx, s.Key("ops"), &goredis.ZRangeBy{Min: "-", Max: max, Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list operations: %w", err)
	}
	pipe := s.c.Pipeline()
	cs := make([]*goredis.MapStringStringCmd, len(ms))
	for i, id := range memberIDs(ms) {
		cs[i] = pipe.HGetAll(ctx, s.Key("op", id))
	}
	if len(ms) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("redis: list operations: %w", err)
		}
	}
	var out []*sluicetype.Operation
	for _, c := range cs {
		if len(c.Val()) == 0 {
			continue
		}
		r, err := opFrom(c.Val())
		if err != nil {
			return nil, err
		}
		out = append(out, r.op)
	}
	return out, nil
}

// OperationCancel marks a pending or running operation cancelled.
func (s *Store) OperationCancel(ctx context.Context, p *backend.OperationCancelParams) (*sluicetype.Operation, error) {
	v, err := s.run(ctx, "cancel operation "+p.ID, luaOpCancel, p.ID, p.Message)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("cancel operation %s: %w", p.ID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, fmt.Errorf("cancel operation %s: %w: it is %s", p.ID, sluicetype.ErrWrongState, r.arg)
			}
		}
		return nil, err
	}
	r, err := opFrom(fieldMap(v))
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// OperationClaim leases the oldest pending or running operation whose
// lease is free or expired.
func (s *Store) OperationClaim(ctx context.Context, p *backend.OperationClaimParams) (*backend.OperationLease, error) {
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	v, err := s.run(ctx, "claim operation", luaOpClaim, p.Holder, dstr(ttl))
	if err != nil {
		return nil, err
	}
	m := fieldMap(v)
	if len(m) == 0 {
		return nil, nil
	}
	r, err := opFrom(m)
	if err != nil {
		return nil, err
	}
	return &backend.OperationLease{Operation: r.op, Holder: r.holder, Fence: r.fence, Cursor: r.cursor}, nil
}

// OperationFinish sets a running operation's status and error, fenced on
// its lease.
func (s *Store) OperationFinish(ctx context.Context, p *backend.OperationFinishParams) (*sluicetype.Operation, error) {
	final := p.Status != sluicetype.OperationRunning && p.Status != sluicetype.OperationPending
	v, err := s.run(ctx, "finish operation "+p.ID, luaOpFinish, "id", p.ID, "st", string(p.Status), "final", flag(final),
		"er", p.Error, "holder", p.Holder, "fence", strconv.FormatInt(p.Fence, 10))
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "LEASE" {
			return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
		}
		return nil, err
	}
	r, err := opFrom(fieldMap(v))
	if err != nil {
		return nil, err
	}
	return r.op, nil
}

// goFiltered reports whether a selector has conditions only Go evaluates
// (the batch script tests the others itself).
func goFiltered(f *sluicetype.Filter) bool {
	return len(f.Tags) > 0 || f.Error != "" || len(f.Payload) > 0 || len(f.Meta) > 0
}

// OperationProcessBatch runs one batch the engine chose in one script,
// fenced on the operation lease and cursor. The script walks the window of
// ids past the cursor and tests the selector's indexed conditions itself;
// conditions only Go evaluates (tags, error text, payload and meta paths)
// are judged here first, job by job with its version, and the script
// takes those verdicts only for jobs whose version is unchanged (else it
// writes nothing and the batch is judged again).
func (s *Store) OperationProcessBatch(ctx context.Context, p *backend.OperationProcessBatchParams) (*backend.OperationBatchResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = sluicetype.OperationBatch
	}
	window := max(p.Window, limit)
	// A script blocks the server while it runs: a batch takes at most
	// maxBatchScript jobs (the engine's "up to Limit" allows fewer; the
	// cursor says where the next batch starts).
	limit = min(limit, maxBatchScript)
	ttl := p.TTL
	if ttl <= 0 {
		ttl = defaultOperationLease
	}
	if p.Spec.To == "" || len(p.Spec.From) == 0 || len(p.Selector.States) == 0 {
		return nil, fmt.Errorf("operation %s: %w: a batch needs a spec and a selector narrowed to its states", p.ID, sluicetype.ErrInvalid)
	}
	sel := &p.Selector
	if err := checkFilter(sel); err != nil {
		return nil, err
	}
	judged := goFiltered(sel)
	if judged {
		window = min(window, s.verdictWindow(p.ID, p.After))
	}
	base := []any{"id", p.ID, "holder", p.Holder, "fence", strconv.FormatInt(p.Fence, 10), "after", p.After,
		"limit", strconv.Itoa(limit), "window", strconv.Itoa(window),
		"budget", strconv.FormatInt(cmp.Or(s.batchBudget, batchScriptBudget).Microseconds(), 10), "ttl", dstr(ttl), "cutoff", tstr(p.Cutoff),
		"f_states", joinStates(sel.States), "f_queues", strings.Join(sel.Queues, us), "f_kinds", strings.Join(sel.Kinds, us),
		"f_ids", strings.Join(sel.IDs, us), "f_fp", sel.Fingerprint, "f_ep", sel.ErrorPattern,
		"f_ca", tptr(sel.CreatedAfter), "f_cb", tptr(sel.CreatedBefore), "f_fa", tptr(sel.FinalizedAfter),
		"f_fb", tptr(sel.FinalizedBefore), "f_sup", flag(sel.IncludeSuperseded),
		"ev", flag(p.Spec.Event != ""), "ev_kind", string(p.Event.Kind), "ev_actor", p.Event.Actor,
		"ev_to", string(p.Event.To), "ev_msg", p.Event.Message}
	base = append(base, specArgs(p.Spec)...)
	var v any
	var err error
	var judgedIDs []string
	for range 20 {
		args := base
		if judged {
			var verdicts string
			verdicts, judgedIDs, err = s.verdicts(ctx, p.After, window, sel)
			if err != nil {
				return nil, err
			}
			args = append(append([]any(nil), base...), "f_more", "1", "f_verdicts", verdicts)
		}
		v, err = s.run(ctx, "operation "+p.ID+" batch", luaOpBatch, args...)
		if r, ok := asRefusal(err); ok && r.code == "RETRY" {
			continue
		}
		break
	}
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrNotFound)
			case "LEASE":
				return nil, fmt.Errorf("operation %s: %w", p.ID, sluicetype.ErrLeaseLost)
			case "RETRY":
				return nil, fmt.Errorf("operation %s: %w: its jobs kept changing under the batch", p.ID, sluicetype.ErrConflict)
			}
		}
		return nil, err
	}
	rep, _ := v.([]any)
	if len(rep) < 2 {
		return nil, fmt.Errorf("redis: operation %s batch: bad reply", p.ID)
	}
	r, err := opFrom(fieldMap(rep[1]))
	if err != nil {
		return nil, err
	}
	if rep[0] == "over" {
		if judged {
			s.walked(p.ID, nil, "", true)
		}
		return &backend.OperationBatchResult{Operation: r.op, Cursor: r.cursor}, nil
	}
	out := &backend.OperationBatchResult{Operation: r.op}
	out.Cursor, _ = rep[2].(string)
	done, _ := rep[3].(int64)
	out.Exhausted = done == 1
	if judged {
		s.walked(p.ID, judgedIDs, out.Cursor, out.Exhausted)
	}
	ref := strs(rep[4])
	for i := 0; i+1 < len(ref); i += 2 {
		out.Refused = append(out.Refused, &sluicetype.QuarantinedError{Verb: string(p.Spec.Action), ID: ref[i], Fingerprint: ref[i+1]})
	}
	if p.Spec.To == sluicetype.StateAvailable {
		s.publishWake(ctx) // the batch's queues are not told apart: every queue
	}
	return out, nil
}

// verdictWindow is how many jobs past after to judge for operation id's
// next batch: twice what its previous batch walked (walked), or
// firstVerdictWindow for its first batch here.
func (s *Store) verdictWindow(id, after string) int {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if h, ok := s.opWalk[id]; ok && h.after == after {
		return h.next
	}
	return firstVerdictWindow
}

// walked notes how far a judged batch got: the cursor's place among the
// ids it judged. An operation exhausted or over is forgotten.
func (s *Store) walked(id string, ids []string, cursor string, exhausted bool) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if exhausted {
		delete(s.opWalk, id)
		return
	}
	n := sort.SearchStrings(ids, cursor)
	if n < len(ids) && ids[n] == cursor {
		n++
	}
	if s.opWalk == nil {
		s.opWalk = map[string]walkHint{}
	}
	s.opWalk[id] = walkHint{after: cursor, next: max(2*n, minVerdictWindow)}
}

// walkHint is where an operation's judged batches got to (walked).
type walkHint struct {
	after string // the cursor the next batch starts from
	next  int    // the window to judge for it
}

// verdicts judges the jobs of a batch's window on the whole selector:
// records "id US version US 0|1" joined by RS, and the ids judged, in
// order.
func (s *Store) verdicts(ctx context.Context, after string, window int, sel *sluicetype.Filter) (string, []string, error) {
	lo := "-"
	if after != "" {
		lo = "(" + after
	}
	var ids []string
	if sel.ErrorPattern != "" {
		// The script's window for a group selector (see luaOpBatch).
		gs, err := s.groupKeys(ctx)
		if err != nil {
			return "", nil, err
		}
		for _, g := range gs {
			if g.pattern != sel.ErrorPattern || !g.fits(sel, sel.States) {
				continue
			}
			more, err := s.c.ZRangeByLex(ctx, s.Key("egi", g.raw), &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(window)}).Result()
			if err != nil {
				return "", nil, fmt.Errorf("redis: batch window: %w", err)
			}
			ids = append(ids, more...)
		}
		sort.Strings(ids)
		ids = ids[:min(len(ids), window)]
	} else {
		var err error
		ids, err = s.c.ZRangeByLex(ctx, s.Key("ids"), &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(window)}).Result()
		if err != nil {
			return "", nil, fmt.Errorf("redis: batch window: %w", err)
		}
	}
	rs, err := s.rows(ctx, ids, needsPayload(sel), true)
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte('\x1e')
		}
		b.WriteString(r.j.ID + us + strconv.FormatInt(r.j.Version, 10) + us + flag(match(r, sel, false, nil)))
	}
	return b.String(), ids, nil
}
