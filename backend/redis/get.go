package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

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
		hs[i] = pipe.HGetAll(ctx, s.key("job", id))
		if lastError {
			es[i] = pipe.LRange(ctx, s.key("err", id), -1, -1)
		} else {
			es[i] = pipe.LRange(ctx, s.key("err", id), 0, -1)
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
	vs, err := s.c.LRange(ctx, s.key("ev", p.JobID), 0, -1).Result()
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
