package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/engine"
)

// TestOpenSchemaRule holds Open to DESIGN's creation rule: MustExist never
// creates; a namespace behind or ahead is refused, naming both versions and
// sluice migrate, unless migration is allowed (ahead: never).
func TestOpenSchemaRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		have    string // the schema key before Open; "" for an empty namespace
		opts    redis.Options
		wantErr []string // substrings of the error; nil for success
		after   string   // the schema key after Open
	}{
		{"empty must exist", "", redis.Options{MustExist: true}, []string{"is empty", "sluice migrate --store"}, ""},
		{"empty created", "", redis.Options{}, nil, "1"},
		{"behind refused", "0", redis.Options{}, []string{"version 0", "needs 1", "sluice migrate --store"}, "0"},
		{"behind must exist", "0", redis.Options{MustExist: true}, []string{"version 0", "needs 1"}, "0"},
		{"behind migrated", "0", redis.Options{Migrate: true}, nil, "1"},
		{"ahead refused", "2", redis.Options{Migrate: true}, []string{"version 2", "newer than this build's 1", "sluice migrate --store"}, "2"},
		{"current", "1", redis.Options{MustExist: true}, nil, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := redistest.URL(t)
			ns := u[strings.LastIndex(u, "ns=")+3:]
			probe := redistest.New(t) // a client on the server, in a namespace of its own
			c := probe.Client()
			key := "{" + ns + "}:schema"
			if tc.have != "" {
				if err := c.Set(ctx, key, tc.have, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			s, err := redis.Open(ctx, u, tc.opts)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				s.Close()
			} else {
				if !errors.Is(err, redis.ErrNoStore) {
					t.Fatalf("Open: %v, want ErrNoStore", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
			}
			got, _ := c.Get(ctx, key).Result()
			if got != tc.after {
				t.Errorf("schema key after Open = %q, want %q", got, tc.after)
			}
		})
	}
}

// TestTimesExactToTheNanosecond: times a caller gives come back exactly,
// and jobs due a nanosecond apart are claimed in that order (the claim
// index orders them by the time's 19 digits, not by a float score).
func TestTimesExactToTheNanosecond(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	base := time.Date(2020, 1, 2, 3, 4, 5, 123456789, time.UTC)
	dl := time.Date(2199, 1, 2, 3, 4, 5, 987654321, time.UTC)
	// "b" is due a nanosecond before "a": the ids sort the other way.
	res, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: []*engine.JobInsertParams{
		{ID: "a", Queue: "q", Kind: "k", Payload: []byte(`{}`), SchemaVersion: 1, MaxAttempts: 3, ScheduledAt: ptr(base.Add(time.Nanosecond)), Deadline: &dl},
		{ID: "b", Queue: "q", Kind: "k", Payload: []byte(`{}`), SchemaVersion: 1, MaxAttempts: 3, ScheduledAt: &base},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	a, err := s.JobGetByID(ctx, &engine.JobGetByIDParams{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !a.ScheduledAt.Equal(base.Add(time.Nanosecond)) || a.Deadline == nil || !a.Deadline.Equal(dl) {
		t.Fatalf("scheduled_at %s deadline %v; want %s and %s", a.ScheduledAt.Format(time.RFC3339Nano), a.Deadline,
			base.Add(time.Nanosecond).Format(time.RFC3339Nano), dl.Format(time.RFC3339Nano))
	}
	var order []string
	for range 2 {
		c, err := s.JobClaim(ctx, &engine.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "l", Limit: 1,
			Kinds: map[string]int{"k": 1}, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range c.Jobs {
			order = append(order, j.ID)
		}
	}
	if !slices.Equal(order, []string{"b", "a"}) {
		t.Fatalf("claimed %v, want [b a] (b is due 1ns earlier)", order)
	}
}

func ptr[T any](v T) *T { return &v }

// TestNoOrphanedKeys: once retention has removed every job of a
// namespace, the namespace holds only its fixed keys.
func TestNoOrphanedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	var jobs []*engine.JobInsertParams
	for i := range 30 {
		jobs = append(jobs, &engine.JobInsertParams{ID: fmt.Sprintf("j%02d", i), Queue: fmt.Sprintf("q%d", i%3), Kind: "k",
			Payload: []byte(`{"n":1}`), SchemaVersion: 1, MaxAttempts: 1, Fingerprint: fmt.Sprintf("fp%d", i%4), Tags: []string{"t"}})
	}
	if _, err := s.JobInsertMany(ctx, &engine.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	// Every job runs; even ones succeed, odd ones die with an error and
	// an event, so every kind of key a job has is written.
	for q := range 3 {
		c, err := s.JobClaim(ctx, &engine.JobClaimParams{Queue: fmt.Sprintf("q%d", q), WorkerID: "w", LeaseID: "l", Limit: 100,
			Kinds: map[string]int{"k": 1}, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var done []engine.JobCompleteItem
		for i, j := range c.Jobs {
			if i%2 == 0 {
				done = append(done, engine.JobCompleteItem{JobRef: engine.JobRef{ID: j.ID, LeaseID: "l", Fence: j.Fence}})
				continue
			}
			if _, err := s.JobFinish(ctx, &engine.JobFinishParams{JobRef: engine.JobRef{ID: j.ID, LeaseID: "l", Fence: j.Fence},
				To: engine.StateArchived, Reason: engine.ReasonAttemptsExhausted, Charge: engine.ChargeAttempt, Finalize: true,
				Error:  &engine.ErrorWrite{Entry: engine.AttemptError{Attempt: 0, Message: "boom 1"}, Keep: 20, LastError: "boom 1", Pattern: "boom <n>"},
				Event:  &engine.EventWrite{Kind: engine.EventArchived, From: engine.StateRunning, To: engine.StateArchived, Message: "boom 1"},
				Counts: []engine.CountDelta{{Queue: j.Queue, From: engine.StateRunning, To: engine.StateArchived, N: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.JobCompleteMany(ctx, &engine.JobCompleteManyParams{Items: done}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := redistest.Keys(ctx, s.Client(), s.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	retention := map[engine.State]time.Duration{}
	for _, st := range engine.TerminalStates() {
		retention[st] = 0
	}
	n, err := s.JobDeleteExpired(ctx, &engine.JobDeleteExpiredParams{Retention: retention, Limit: 1000})
	if err != nil || n != 30 {
		t.Fatalf("deleted %d, %v; want 30", n, err)
	}
	after, err := redistest.Keys(ctx, s.Client(), s.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(after)
	want := []string{s.Key("queues"), s.Key("schema")}
	if !slices.Equal(after, want) {
		t.Fatalf("after retention removed every job the namespace holds %d keys %v (before: %d); want only %v", len(after), after, len(before), want)
	}
	for _, k := range before {
		if !strings.HasPrefix(k, "{"+s.Namespace()+"}:") {
			t.Errorf("key %s does not carry the namespace's hash tag", k)
		}
	}
}
