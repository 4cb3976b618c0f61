package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// FingerprintGet returns a quarantine record or ErrNotFound.
func (s *Store) FingerprintGet(ctx context.Context, p *backend.FingerprintGetParams) (*sluicetype.Fingerprint, error) {
	fs, err := s.fingerprints(ctx, []string{p.Fingerprint})
	if err != nil {
		return nil, err
	}
	if fs[0] == nil {
		return nil, fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
	}
	return fs[0], nil
}

// fingerprints reads quarantine records (nil for a missing one), with
// their held jobs counted from the fingerprint's jobs.
func (s *Store) fingerprints(ctx context.Context, fps []string) ([]*sluicetype.Fingerprint, error) {
	out := make([]*sluicetype.Fingerprint, len(fps))
	pipe := s.c.Pipeline()
	hs := make([]*goredis.MapStringStringCmd, len(fps))
	ms := make([]*goredis.StringSliceCmd, len(fps))
	cs := make([]*goredis.MapStringStringCmd, len(fps))
	for i, fp := range fps {
		hs[i] = pipe.HGetAll(ctx, s.key("fpr", fp))
		ms[i] = pipe.SMembers(ctx, s.key("fpj", fp))
		cs[i] = pipe.HGetAll(ctx, s.key("fsc", fp))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redis: fingerprints: %w", err)
	}
	for i, fp := range fps {
		m := hs[i].Val()
		if len(m) == 0 {
			continue
		}
		h := hashReader{m: m}
		f := &sluicetype.Fingerprint{Fingerprint: fp, Kind: m[qKind], Status: sluicetype.FingerprintStatus(m[qStatus]),
			Since: h.time(qSince), Crashes: h.int(qCrashes), LastError: m[qLastError], LastJobID: m[qLastJob]}
		if h.err != nil {
			return nil, fmt.Errorf("redis: fingerprint %s: %w", fp, h.err)
		}
		sc, err := stepCrashes(cs[i].Val())
		if err != nil {
			return nil, fmt.Errorf("redis: fingerprint %s: %w", fp, err)
		}
		f.StepCrashes = sc
		ids := ms[i].Val()
		if len(ids) > 0 {
			p2 := s.c.Pipeline()
			sts := make([]*goredis.StringCmd, len(ids))
			for k, id := range ids {
				sts[k] = p2.HGet(ctx, s.key("job", id), fState)
			}
			if _, err := p2.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
				return nil, fmt.Errorf("redis: fingerprint %s: %w", fp, err)
			}
			for _, c := range sts {
				if c.Val() == string(sluicetype.StateQuarantined) {
					f.Held++
				}
			}
		}
		out[i] = f
	}
	return out, nil
}

// FingerprintList lists quarantined and probationary fingerprints, newest
// first.
func (s *Store) FingerprintList(ctx context.Context, p *backend.FingerprintListParams) ([]*sluicetype.Fingerprint, error) {
	fps, err := s.c.SMembers(ctx, s.key("fprs")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list fingerprints: %w", err)
	}
	fs, err := s.fingerprints(ctx, fps)
	if err != nil {
		return nil, err
	}
	var out []*sluicetype.Fingerprint
	for _, f := range fs {
		if f != nil && (f.Status == sluicetype.FingerprintQuarantined || f.Status == sluicetype.FingerprintProbation) {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Since.Equal(out[b].Since) {
			return out[a].Since.After(out[b].Since)
		}
		return out[a].Fingerprint < out[b].Fingerprint
	})
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

// luaRelease lifts a fingerprint's quarantine: the record goes on
// probation and its jobs in the spec's from-states get the spec's write
// (FingerprintRelease).
//
// KEYS[1] -> {ns}:schema
// --
// ARGV[1..3] -> the idempotency key, token and step (luaLib)
// ARGV[4...] -> name/value pairs, read into A:
// fp; the spec (s_ prefix, as luaAction);
// ev_kind, ev_actor, ev_to, ev_msg.
//
// Returns how many jobs were released. Errors: "NOTFOUND".
var luaRelease = script(`
local A = args(4)
local S = spec(A, 's_')
local key = K('fpr', A.fp)
if redis.call('EXISTS', key) == 0 then return redis.error_reply('NOTFOUND') end
redis.call('HSET', key, QF.status, 'probation')
local n = 0
for _, from in ipairs(split(A.s_from)) do
  for _, id in ipairs(redis.call('SMEMBERS', K('fpj', A.fp))) do
    local J = load(id)
    if J and J[F.state] == from then
      local O = copy(J)
      apply(J, S, '')
      commit(O, J, true)
      event(id, A.ev_kind, A.ev_actor, from, A.ev_to, O[F.attempt], A.ev_msg)
      n = n + 1
    end
  end
end
idem_record('N' .. n)
return n
`)

// FingerprintRelease lifts a quarantine in one script.
func (s *Store) FingerprintRelease(ctx context.Context, p *backend.FingerprintReleaseParams) (int, error) {
	if p.Spec.Has(backend.EffectDelete) || len(p.Spec.From) == 0 {
		return 0, fmt.Errorf("release fingerprint %s: %w: the spec must move jobs", p.Fingerprint, sluicetype.ErrInvalid)
	}
	a := append([]any{"fp", p.Fingerprint, "ev_kind", string(p.Event.Kind), "ev_actor", p.Event.Actor,
		"ev_to", string(p.Event.To), "ev_msg", p.Event.Message}, specArgs(p.Spec)...)
	v, err := s.run(ctx, "release fingerprint "+p.Fingerprint, luaRelease, a...)
	if err != nil {
		if r, ok := asRefusal(err); ok && r.code == "NOTFOUND" {
			return 0, fmt.Errorf("fingerprint %s: %w", p.Fingerprint, sluicetype.ErrNotFound)
		}
		return 0, err
	}
	n, _ := v.(int64)
	if n > 0 {
		s.publishWake(ctx) // the fingerprint's queues: every queue
	}
	return int(n), nil
}
