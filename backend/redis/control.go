package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// Operator actions, quarantine records, workers, leaders, queues and
// counters.

// specArgs are an action spec's name/value pairs for a script (the s_
// prefix of luaLib's spec).
func specArgs(spec backend.ActionSpec) []any {
	return []any{
		"s_from", joinStates(spec.From), "s_to", string(spec.To), "s_reason", string(spec.Reason),
		"s_clear", flag(spec.Has(backend.EffectClearLease)), "s_schednow", flag(spec.Has(backend.EffectScheduleNow)),
		"s_fin", flag(spec.Has(backend.EffectFinalize)), "s_reopen", flag(spec.Has(backend.EffectReopen)),
		"s_onemore", flag(spec.Has(backend.EffectOneMoreAttempt)), "s_reset", flag(spec.Has(backend.EffectResetCrashes)),
		"s_del", flag(spec.Has(backend.EffectDelete)), "s_rquar", flag(spec.Refuses(backend.RefuseQuarantined)),
		"s_rsuper", flag(spec.Refuses(backend.RefuseSuperseded)),
	}
}

// JobAction applies one operator action's spec to one job in one script.
func (s *Store) JobAction(ctx context.Context, p *backend.JobActionParams) (*sluicetype.Job, error) {
	spec := &p.Spec
	if spec.To == "" || len(spec.From) == 0 {
		return nil, fmt.Errorf("%s job %s: %w: empty action spec", spec.Action, p.ID, sluicetype.ErrInvalid)
	}
	a := append([]any{"id", p.ID, "force", flag(p.Force), "deadline", tptr(p.Deadline),
		"ev", flag(spec.Event != ""), "ev_kind", string(p.Event.Kind), "ev_actor", p.Event.Actor,
		"ev_to", string(p.Event.To), "ev_msg", p.Event.Message}, specArgs(*spec)...)
	v, err := s.run(ctx, string(spec.Action)+" job "+p.ID, luaAction, a...)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, &sluicetype.StateError{Action: spec.Action, ID: p.ID, State: sluicetype.State(r.arg), Allowed: spec.From}
			case "SUPER":
				return nil, &sluicetype.SupersededError{ID: p.ID, By: r.arg}
			case "QUAR":
				return nil, &sluicetype.QuarantinedError{Verb: string(spec.Action), ID: p.ID, Fingerprint: r.arg}
			}
		}
		return nil, err
	}
	if arr, _ := v.([]any); len(arr) == 0 {
		return nil, nil
	}
	j, err := jobReply(v, false)
	if err == nil && j.State == sluicetype.StateAvailable {
		s.publishWake(ctx, j.Queue)
	}
	return j, err
}

// JobUpdatePayload replaces the payload and fingerprint of a job that is
// not running, if its version is still p.Version.
func (s *Store) JobUpdatePayload(ctx context.Context, p *backend.JobUpdatePayloadParams) (*sluicetype.Job, error) {
	v, err := s.run(ctx, "edit payload of job "+p.ID, luaUpdatePayload,
		"id", p.ID, "payload", string(p.Payload), "fp", p.Fingerprint, "version", strconv.FormatInt(p.Version, 10),
		"running", string(sluicetype.StateRunning),
		"ev_kind", string(p.Event.Kind), "ev_actor", p.Event.Actor, "ev_msg", p.Event.Message)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, &sluicetype.StateError{Action: "edit payload of", ID: p.ID, State: sluicetype.State(r.arg), Allowed: editableStates()}
			case "VERSION":
				have, _ := strconv.ParseInt(r.arg, 10, 64)
				return nil, &sluicetype.VersionError{ID: p.ID, Have: have, Want: p.Version}
			}
		}
		return nil, err
	}
	j, err := jobReply(v, true)
	if err == nil {
		s.publishWake(ctx, j.Queue)
	}
	return j, err
}

// editableStates are the states whose payload can be edited: all but running.
func editableStates() []sluicetype.State {
	var out []sluicetype.State
	for _, st := range sluicetype.AllStates {
		if st != sluicetype.StateRunning {
			out = append(out, st)
		}
	}
	return out
}

// JobRetryCopy inserts the corrected copy of a finished job and marks
// the original superseded by it, in one script.
func (s *Store) JobRetryCopy(ctx context.Context, p *backend.JobRetryCopyParams) (*sluicetype.Job, error) {
	v, err := s.run(ctx, "retry job "+p.ID+" with input", luaRetryWithInput,
		"id", p.ID, "newid", p.NewID, "payload", string(p.Payload), "fp", p.Fingerprint,
		"allowed", joinStates(sluicetype.TerminalStates()), "to", string(sluicetype.StateAvailable),
		"o_kind", string(p.OriginalEvent.Kind), "o_actor", p.OriginalEvent.Actor, "o_msg", p.OriginalEvent.Message,
		"c_kind", string(p.CopyEvent.Kind), "c_actor", p.CopyEvent.Actor, "c_to", string(p.CopyEvent.To),
		"c_msg", p.CopyEvent.Message)
	if err != nil {
		if r, ok := asRefusal(err); ok {
			switch r.code {
			case "NOTFOUND":
				return nil, fmt.Errorf("job %s: %w", p.ID, sluicetype.ErrNotFound)
			case "STATE":
				return nil, &sluicetype.StateError{Action: "retry with input", ID: p.ID, State: sluicetype.State(r.arg), Allowed: sluicetype.TerminalStates()}
			case "QUAR":
				return nil, &sluicetype.QuarantinedError{Verb: "retry with input", ID: p.ID, Fingerprint: r.arg}
			case "CONFLICT":
				return nil, fmt.Errorf("retry job %s with input: %w: job %s exists", p.ID, sluicetype.ErrConflict, p.NewID)
			}
		}
		return nil, err
	}
	return jobReply(v, true)
}

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
		hs[i] = pipe.HGetAll(ctx, s.Key("fpr", fp))
		ms[i] = pipe.SMembers(ctx, s.Key("fpj", fp))
		cs[i] = pipe.HGetAll(ctx, s.Key("fsc", fp))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redis: fingerprints: %w", err)
	}
	for i, fp := range fps {
		m := hs[i].Val()
		if len(m) == 0 {
			continue
		}
		f := &sluicetype.Fingerprint{Fingerprint: fp, Kind: m["kind"], Status: sluicetype.FingerprintStatus(m["st"]),
			Since: ttime(m["since"]), Crashes: atoi(m["cr"]), LastError: m["le"], LastJobID: m["lj"]}
		f.StepCrashes = stepCrashes(cs[i].Val())
		ids := ms[i].Val()
		if len(ids) > 0 {
			p2 := s.c.Pipeline()
			sts := make([]*goredis.StringCmd, len(ids))
			for k, id := range ids {
				sts[k] = p2.HGet(ctx, s.Key("job", id), "s")
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
	fps, err := s.c.SMembers(ctx, s.Key("fprs")).Result()
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

// WorkerHeartbeat records that a worker process lives, until TTL.
func (s *Store) WorkerHeartbeat(ctx context.Context, p *backend.WorkerHeartbeatParams) error {
	_, err := s.run(ctx, "heartbeat of worker "+p.ID, luaHeartbeat, p.ID, p.Host, strconv.Itoa(p.PID),
		jsonStrings(p.Queues), dstr(p.TTL))
	return err
}

// WorkerDelete removes a worker's record.
func (s *Store) WorkerDelete(ctx context.Context, p *backend.WorkerDeleteParams) error {
	_, err := s.run(ctx, "delete worker "+p.ID, luaWorkerDelete, p.ID)
	return err
}

// LeaderAttempt takes or renews the named maintenance lease for holder.
func (s *Store) LeaderAttempt(ctx context.Context, p *backend.LeaderAttemptParams) (bool, error) {
	v, err := s.run(ctx, "leader "+p.Name, luaLeader, p.Name, p.Holder, dstr(p.TTL))
	if err != nil {
		return false, err
	}
	n, _ := v.(int64)
	return n == 1, nil
}

// LeaderResign gives the lease up if holder has it.
func (s *Store) LeaderResign(ctx context.Context, p *backend.LeaderResignParams) error {
	_, err := s.run(ctx, "resign "+p.Name, luaResign, p.Name, p.Holder)
	return err
}

// JobCountByQueue reads the maintained counters.
func (s *Store) JobCountByQueue(ctx context.Context, p *backend.JobCountByQueueParams) (map[string]map[sluicetype.State]int64, error) {
	m, err := s.c.HGetAll(ctx, s.Key("counts")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: job counts: %w", err)
	}
	out := map[string]map[sluicetype.State]int64{}
	for f, v := range m {
		q, st, ok := strings.Cut(f, us)
		n := atoi64(v)
		if !ok || n == 0 || (p.Queue != "" && q != p.Queue) {
			continue
		}
		if out[q] == nil {
			out[q] = map[sluicetype.State]int64{}
		}
		out[q][sluicetype.State(st)] = n
	}
	return out, nil
}

// JobCountReconcile recounts the counters from the per-queue state
// indexes.
func (s *Store) JobCountReconcile(ctx context.Context) error {
	_, err := s.run(backend.WithoutIdempotencyWrite(ctx), "reconcile counts", luaReconcile, joinStates(sluicetype.AllStates))
	return err
}

// QueueList names every queue that has jobs or a paused record.
func (s *Store) QueueList(ctx context.Context) ([]sluicetype.QueueInfo, error) {
	counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
	if err != nil {
		return nil, err
	}
	paused, err := s.c.HGetAll(ctx, s.Key("paused")).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list queues: %w", err)
	}
	names := make([]string, 0, len(counts)+len(paused))
	for q := range counts {
		names = append(names, q)
	}
	for q := range paused {
		if _, ok := counts[q]; !ok {
			names = append(names, q)
		}
	}
	sort.Strings(names)
	out := make([]sluicetype.QueueInfo, len(names))
	for i, q := range names {
		c := counts[q]
		if c == nil {
			c = map[sluicetype.State]int64{}
		}
		out[i] = sluicetype.QueueInfo{Name: q, Paused: paused[q] == "1", Counts: c}
	}
	return out, nil
}

// QueuePause stops workers claiming from a queue.
func (s *Store) QueuePause(ctx context.Context, p *backend.QueuePauseParams) error {
	_, err := s.run(ctx, "pause queue "+p.Queue, luaPause, p.Queue, "1", p.Actor)
	return err
}

// QueueResume lets workers claim from a queue again.
func (s *Store) QueueResume(ctx context.Context, p *backend.QueuePauseParams) error {
	_, err := s.run(ctx, "resume queue "+p.Queue, luaPause, p.Queue, "0", p.Actor)
	if err == nil {
		s.publishWake(ctx, p.Queue)
	}
	return err
}
