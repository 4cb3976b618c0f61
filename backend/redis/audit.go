package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// The audit trail (backend.AuditStore) is the stream {ns}:audit: one
// entry per operator action, appended by the action's own script (run
// passes the record as ARGV's last value, luaLib and script append it),
// or by luaAuditAppend on its own. A stream is append-only by design;
// its ids are the server's time in milliseconds and a sequence, so
// records list newest first by id and a time range is an id range.
// Each entry holds at (the store's now, 19 digits of nanoseconds) and r
// (the record as JSON, without id and time).

// auditArg is the audit record a script run under ctx appends, as JSON;
// "" for none.
func auditArg(ctx context.Context) (string, error) {
	r, ok := backend.AuditWriteFrom(ctx)
	if !ok {
		return "", nil
	}
	return auditJSON(r)
}

func auditJSON(r *sluicetype.AuditRecord) (string, error) {
	rec := *r
	rec.ID, rec.At = "", time.Time{}
	b, err := json.Marshal(&rec)
	if err != nil {
		return "", fmt.Errorf("redis: audit record: %w", err)
	}
	return string(b), nil
}

// luaAuditAppend appends a record on its own.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.rec -> the record as JSON
//
// Returns {id, at}.
var luaAuditAppend = script(`
local A = args(4)
return {audit_append(A.rec), NOW}
`)

// AuditAppend appends one record in a script of its own.
func (s *Store) AuditAppend(ctx context.Context, p *backend.AuditAppendParams) (*sluicetype.AuditRecord, error) {
	ctx = backend.WithoutAuditWrite(backend.WithoutIdempotencyWrite(ctx))
	rec, err := auditJSON(&p.Record)
	if err != nil {
		return nil, err
	}
	v, err := s.run(ctx, "audit append", luaAuditAppend, "rec", rec)
	if err != nil {
		return nil, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 2 {
		return nil, fmt.Errorf("redis: audit append: unexpected reply %v", v)
	}
	out := p.Record
	out.ID, _ = r[0].(string)
	at, _ := r[1].(string)
	out.At = parseAuditAt(at)
	return &out, nil
}

func parseAuditAt(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n).UTC()
}

// auditScanChunk is how many entries AuditList reads per XREVRANGE
// while it filters.
const auditScanChunk = 500

// AuditList pages the records the query selects, newest first. A time
// range bounds the stream's ids; the other fields are matched in Go,
// reading the stream in chunks until the page is full or the range ends.
func (s *Store) AuditList(ctx context.Context, p *backend.AuditListParams) ([]*sluicetype.AuditRecord, error) {
	q := p.Query
	limit := auditLimit(q.Limit)
	hi, lo := "+", "-"
	if !q.Until.IsZero() {
		// Until is exclusive; a millisecond id range is coarser than the
		// nanosecond times, so the range is widened and At filters.
		hi = strconv.FormatInt(q.Until.UnixMilli(), 10)
	}
	if !q.Since.IsZero() {
		lo = strconv.FormatInt(q.Since.UnixMilli(), 10)
	}
	if q.After != "" {
		if !validStreamID(q.After) {
			return nil, fmt.Errorf("audit cursor %q: %w", q.After, sluicetype.ErrInvalid)
		}
		if hi == "+" || streamIDLess(q.After, hi) {
			hi = "(" + q.After
		}
	}
	var out []*sluicetype.AuditRecord
	for len(out) < limit {
		msgs, err := s.c.XRevRangeN(ctx, s.key("audit"), hi, lo, auditScanChunk).Result()
		if err != nil {
			return nil, fmt.Errorf("redis: audit list: %w", err)
		}
		for _, m := range msgs {
			r, err := auditRecordOf(m)
			if err != nil {
				return nil, err
			}
			if q.Matches(r) {
				out = append(out, r)
				if len(out) == limit {
					break
				}
			}
		}
		if len(msgs) < auditScanChunk {
			break
		}
		hi = "(" + msgs[len(msgs)-1].ID
	}
	return out, nil
}

func auditRecordOf(m goredis.XMessage) (*sluicetype.AuditRecord, error) {
	r := &sluicetype.AuditRecord{}
	rec, _ := m.Values["r"].(string)
	if err := json.Unmarshal([]byte(rec), r); err != nil {
		return nil, fmt.Errorf("redis: audit record %s: %w", m.ID, err)
	}
	at, _ := m.Values["at"].(string)
	r.ID, r.At = m.ID, parseAuditAt(at)
	return r, nil
}

// validStreamID reports whether s is a stream id, ms-seq.
func validStreamID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return ok && err1 == nil && err2 == nil
}

// streamIDLess compares a full stream id with a range bound (an id, or
// milliseconds alone).
func streamIDLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if x != y {
		return x < y
	}
	if bs == "" {
		return true
	}
	i, _ := strconv.ParseUint(as, 10, 64)
	j, _ := strconv.ParseUint(bs, 10, 64)
	return i < j
}

// auditLimit is a page's size: MaxAuditPage at most, 50 when unset.
func auditLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > backend.MaxAuditPage:
		return backend.MaxAuditPage
	}
	return n
}

// luaAuditTrim deletes the records older than a retention by the
// server's clock, at most a limit, oldest first.
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// A.retention_ms -> the retention in milliseconds
// A.limit -> the most entries deleted
//
// Returns how many were deleted.
var luaAuditTrim = script(`
local A = args(4)
local cut = NOW_S * 1000 + math.floor(NOW_NS / 1000000) - tonumber(A.retention_ms)
local old = redis.call('XRANGE', K('audit'), '-', '(' .. string.format('%d', cut), 'COUNT', tonumber(A.limit))
for _, e in ipairs(old) do redis.call('XDEL', K('audit'), e[1]) end
return #old
`)

// AuditDeleteExpired deletes up to Limit records older than Retention.
func (s *Store) AuditDeleteExpired(ctx context.Context, p *backend.AuditDeleteExpiredParams) (int, error) {
	ctx = backend.WithoutAuditWrite(ctx)
	if p.Retention <= 0 {
		return 0, fmt.Errorf("redis: audit retention %v: %w", p.Retention, sluicetype.ErrInvalid)
	}
	limit := p.Limit
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	v, err := s.run(ctx, "audit retention", luaAuditTrim, "retention_ms", strconv.FormatInt(p.Retention.Milliseconds(), 10),
		"limit", strconv.Itoa(limit))
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return int(n), nil
}
