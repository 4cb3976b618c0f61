package redis_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/internal/redisserver"
	"github.com/sluicehq/sluice/sluicetype"
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
		{"empty created", "", redis.Options{}, nil, "5"},
		{"behind refused", "0", redis.Options{}, []string{"version 0", "needs 5", "sluice migrate --store"}, "0"},
		{"version 1 refused", "1", redis.Options{}, []string{"version 1", "needs 5", "sluice migrate --store"}, "1"},
		{"version 2 refused", "2", redis.Options{}, []string{"version 2", "needs 5", "sluice migrate --store"}, "2"},
		{"version 3 refused", "3", redis.Options{}, []string{"version 3", "needs 5", "sluice migrate --store"}, "3"},
		{"version 4 refused", "4", redis.Options{}, []string{"version 4", "needs 5", "sluice migrate --store", "--migrate"}, "4"},
		{"behind must exist", "1", redis.Options{MustExist: true}, []string{"version 1", "needs 5"}, "1"},
		{"behind migrated", "0", redis.Options{Migrate: true}, nil, "5"},
		{"version 1 migrated", "1", redis.Options{Migrate: true}, nil, "5"},
		{"version 2 migrated", "2", redis.Options{Migrate: true}, nil, "5"},
		{"version 3 migrated", "3", redis.Options{Migrate: true}, nil, "5"},
		{"version 4 migrated", "4", redis.Options{Migrate: true}, nil, "5"},
		{"ahead refused", "6", redis.Options{Migrate: true}, []string{"version 6", "newer than this build's 5", "sluice migrate --store"}, "6"},
		{"current", "5", redis.Options{MustExist: true}, nil, "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := redistest.URL(t)
			ns := u[strings.LastIndex(u, "ns=")+3:]
			probe := redistest.New(t) // a client on the server, in a namespace of its own
			c := redis.Client(probe)
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
	res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
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
	a, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !a.ScheduledAt.Equal(base.Add(time.Nanosecond)) || a.Deadline == nil || !a.Deadline.Equal(dl) {
		t.Fatalf("scheduled_at %s deadline %v; want %s and %s", a.ScheduledAt.Format(time.RFC3339Nano), a.Deadline,
			base.Add(time.Nanosecond).Format(time.RFC3339Nano), dl.Format(time.RFC3339Nano))
	}
	var order []string
	for range 2 {
		c, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "l", Limit: 1,
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
	var jobs []*backend.JobInsertParams
	for i := range 30 {
		jobs = append(jobs, &backend.JobInsertParams{ID: fmt.Sprintf("j%02d", i), Queue: fmt.Sprintf("q%d", i%3), Kind: "k",
			Payload: []byte(`{"n":1}`), SchemaVersion: 1, MaxAttempts: 1, Fingerprint: fmt.Sprintf("fp%d", i%4), Tags: []string{"t"}})
		if i%2 == 0 {
			// A unique key's holder and its set of jobs go with the jobs.
			jobs[i].UniqueKey, jobs[i].UniqueStates = fmt.Sprintf("uk%d", i), sluicetype.UniqueStatesMask(sluicetype.DefaultUniqueStates)
		}
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	// Every job runs; even ones succeed, odd ones die with an error and
	// an event, so every kind of key a job has is written.
	for q := range 3 {
		c, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: fmt.Sprintf("q%d", q), WorkerID: "w", LeaseID: "l", Limit: 100,
			Kinds: map[string]int{"k": 1}, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var done []backend.JobCompleteItem
		for i, j := range c.Jobs {
			if i%2 == 0 {
				done = append(done, backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: "l", Fence: j.Fence}})
				continue
			}
			if _, err := s.JobFinish(ctx, &backend.JobFinishParams{JobRef: backend.JobRef{ID: j.ID, LeaseID: "l", Fence: j.Fence},
				To: sluicetype.StateArchived, Reason: sluicetype.ReasonAttemptsExhausted, Charge: backend.ChargeAttempt, Finalize: true,
				Error:  &backend.ErrorWrite{Entry: sluicetype.AttemptError{Attempt: 0, Message: "boom 1"}, Keep: 20, LastError: "boom 1", Pattern: "boom <n>"},
				Event:  &backend.EventWrite{Kind: sluicetype.EventArchived, From: sluicetype.StateRunning, To: sluicetype.StateArchived, Message: "boom 1"},
				Counts: []backend.CountDelta{{Queue: j.Queue, From: sluicetype.StateRunning, To: sluicetype.StateArchived, N: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: done}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := redistest.Keys(ctx, redis.Client(s), s.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	retention := map[sluicetype.State]time.Duration{}
	for _, st := range sluicetype.TerminalStates() {
		retention[st] = 0
	}
	n, err := s.JobDeleteExpired(ctx, &backend.JobDeleteExpiredParams{Retention: retention, Limit: 1000})
	if err != nil || n != 30 {
		t.Fatalf("deleted %d, %v; want 30", n, err)
	}
	after, err := redistest.Keys(ctx, redis.Client(s), s.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(after)
	want := []string{redis.Key(s, "qk"), redis.Key(s, "queues"), redis.Key(s, "schema")}
	if !slices.Equal(after, want) {
		t.Fatalf("after retention removed every job the namespace holds %d keys %v (before: %d); want only %v", len(after), after, len(before), want)
	}
	for _, k := range before {
		if !strings.HasPrefix(k, "{"+s.Namespace()+"}:") {
			t.Errorf("key %s does not carry the namespace's hash tag", k)
		}
	}
}

// TestDurabilityWarnings: the store says when the server keeps nothing on
// disk or evicts keys, as the server's own configuration says.
func TestDurabilityWarnings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	cfg, err := redis.Client(s).ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	ws := strings.Join(s.DurabilityWarnings(ctx), "\n")
	noDisk := cfg["appendonly"] != "yes" && strings.TrimSpace(cfg["save"]) == ""
	if got := strings.Contains(ws, "nothing on disk"); got != noDisk {
		t.Errorf("appendonly %q save %q: warnings %q", cfg["appendonly"], cfg["save"], ws)
	}
	evicts := cfg["maxmemory-policy"] != "noeviction"
	if got := strings.Contains(ws, "maxmemory-policy"); got != evicts {
		t.Errorf("maxmemory-policy %q: warnings %q", cfg["maxmemory-policy"], ws)
	}
}

// TestVersion1Layout: jobs written in version 1's layout (every field
// stored, the defaults too) read, claim and complete the same after the
// namespace is migrated to version 2, which leaves the defaults out; a
// namespace at version 1 is refused without migration.
func TestVersion1Layout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, u := migratedStore(t)
	c := redis.Client(s)
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{
		{ID: "old", Queue: "q", Kind: "k", Payload: []byte(`{"n":1}`), SchemaVersion: 1, MaxAttempts: 3},
	}}); err != nil {
		t.Fatal(err)
	}
	key := redis.Key(s, "job", "old")
	if n, _ := c.HExists(ctx, key, "a").Result(); n {
		t.Fatal("version 2 stored the attempt at its default")
	}
	want, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "old", IncludePayload: true})
	if err != nil {
		t.Fatal(err)
	}
	// The hash as version 1 wrote it, and the namespace at version 1.
	if err := c.HSet(ctx, key, "a", "0", "c", "0", "f", "0", "pr", "0", "to", "0", "tg", "[]").Err(); err != nil {
		t.Fatal(err)
	}
	s2 := migrateFrom(t, s, u, 1)
	got, err := s2.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "old", IncludePayload: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("version 1 hash reads\n%+v\nwant\n%+v", got, want)
	}
	r, err := s2.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "l", Limit: 5, LeaseDuration: time.Minute})
	if err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != "old" || r.Jobs[0].Fence != 1 || r.Jobs[0].Attempt != 0 {
		t.Fatalf("claim of the version 1 job: %+v %v", r, err)
	}
	errs, err := s2.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{
		{JobRef: backend.JobRef{ID: "old", LeaseID: "l", Fence: 1}}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("complete: %v %v", err, errs)
	}
	got, err = s2.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "old"})
	if err != nil || got.State != sluicetype.StateCompleted || got.Version != want.Version+2 || got.Fence != 1 {
		t.Fatalf("after complete: %+v %v", got, err)
	}
}

// TestVersion3DropsStateSets: since version 3 no st set holds available
// and completed jobs; their listings without a queue or kind merge their
// queues' sets. A namespace at version 2 is refused without migration,
// and migrating deletes the st sets version 2 wrote for those states and
// keeps every other.
func TestVersion3DropsStateSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, u := migratedStore(t)
	c := redis.Client(s)
	var jobs []*backend.JobInsertParams
	for i, q := range []string{"a", "b", "c", "a"} {
		jobs = append(jobs, &backend.JobInsertParams{ID: fmt.Sprintf("j%d", i), Queue: q, Kind: "k", Payload: []byte(`{}`),
			SchemaVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	// j0 (a) and j2 (c) complete; j1 (b) and j3 (a) stay available.
	for _, q := range []string{"a", "c"} {
		r, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: q, WorkerID: "w", LeaseID: "l" + q, Limit: 1, LeaseDuration: time.Minute})
		if err != nil || len(r.Jobs) != 1 {
			t.Fatalf("claim %s: %+v %v", q, r, err)
		}
		errs, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{
			{JobRef: backend.JobRef{ID: r.Jobs[0].ID, LeaseID: "l" + q, Fence: r.Jobs[0].Fence}}}})
		if err != nil || errs[0] != nil {
			t.Fatalf("complete: %v %v", err, errs)
		}
	}
	for _, st := range []sluicetype.State{sluicetype.StateAvailable, sluicetype.StateCompleted} {
		if n, _ := c.Exists(ctx, redis.Key(s, "st", string(st))).Result(); n != 0 {
			t.Errorf("this build wrote st:%s", st)
		}
	}
	list := func(st sluicetype.State) []string {
		t.Helper()
		var ids []string
		for _, rev := range []bool{false, true} {
			js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: sluicetype.Filter{States: []sluicetype.State{st}}, Limit: 10, Reverse: rev})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range js {
				ids = append(ids, j.ID)
			}
		}
		sort.Strings(ids)
		return ids
	}
	wantAvail, wantDone := []string{"j1", "j1", "j3", "j3"}, []string{"j0", "j0", "j2", "j2"}
	if got := list(sluicetype.StateAvailable); !reflect.DeepEqual(got, wantAvail) {
		t.Errorf("available, both ways: %v, want %v", got, wantAvail)
	}
	if got := list(sluicetype.StateCompleted); !reflect.DeepEqual(got, wantDone) {
		t.Errorf("completed, both ways: %v, want %v", got, wantDone)
	}
	// The namespace as version 2 left it: st sets for every state.
	for _, k := range []string{"available", "completed", "archived"} {
		if err := c.ZAdd(ctx, redis.Key(s, "st", k), goredis.Z{Member: "0000000000000000001:old"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	migrateFrom(t, s, u, 2)
	for k, want := range map[string]int64{"available": 0, "completed": 0, "archived": 1} {
		if n, _ := c.Exists(ctx, redis.Key(s, "st", k)).Result(); n != want {
			t.Errorf("after migrating: st:%s exists %d, want %d", k, n, want)
		}
	}
	if got := list(sluicetype.StateCompleted); !reflect.DeepEqual(got, wantDone) {
		t.Errorf("completed after migrating: %v, want %v", got, wantDone)
	}
}

// TestVersion4PairSets: version 4 keeps available and completed jobs in
// one set per queue and kind (sqk), not in sq and sk; listings by state,
// queue, kind and both, counts and the reconciled counters read them. A
// namespace at version 3 (its entries moved back into sq and sk here) is
// refused without migration, and migrating moves every entry back into
// sqk and leaves no sq or sk set of those states.
func TestVersion4PairSets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, u := migratedStore(t)
	c := redis.Client(s)
	// Eight jobs over two queues and two kinds (the kind "x:y" holds the
	// separator of key parts); the even ones complete.
	type qk struct{ q, k string }
	var jobs []*backend.JobInsertParams
	of := map[string]qk{}
	for i := 0; i < 8; i++ {
		p := qk{[]string{"a", "b"}[i%2], []string{"k", "x:y"}[i/2%2]}
		id := fmt.Sprintf("j%d", i)
		of[id] = p
		jobs = append(jobs, &backend.JobInsertParams{ID: id, Queue: p.q, Kind: p.k, Payload: []byte(`{}`), SchemaVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"a", "a"} {
		r, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: q, WorkerID: "w", LeaseID: "l", Limit: 1, LeaseDuration: time.Minute})
		if err != nil || len(r.Jobs) != 1 {
			t.Fatalf("claim %s: %+v %v", q, r, err)
		}
		errs, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: []backend.JobCompleteItem{
			{JobRef: backend.JobRef{ID: r.Jobs[0].ID, LeaseID: "l", Fence: r.Jobs[0].Fence}}}})
		if err != nil || errs[0] != nil {
			t.Fatalf("complete: %v %v", err, errs)
		}
	}
	// Queue a's two oldest (j0, j2) completed; the rest are available.
	want := func(st sluicetype.State, q, k string) []string {
		var ids []string
		for i := 0; i < 8; i++ {
			id := fmt.Sprintf("j%d", i)
			done := id == "j0" || id == "j2"
			if done != (st == sluicetype.StateCompleted) || (q != "" && of[id].q != q) || (k != "" && of[id].k != k) {
				continue
			}
			ids = append(ids, id)
		}
		return ids
	}
	check := func(when string, s *redis.Store) {
		t.Helper()
		for _, st := range []sluicetype.State{sluicetype.StateAvailable, sluicetype.StateCompleted} {
			for _, f := range []qk{{"", ""}, {"a", ""}, {"b", ""}, {"", "k"}, {"", "x:y"}, {"a", "x:y"}, {"b", "k"}} {
				fl := sluicetype.Filter{States: []sluicetype.State{st}}
				if f.q != "" {
					fl.Queues = []string{f.q}
				}
				if f.k != "" {
					fl.Kinds = []string{f.k}
				}
				for _, rev := range []bool{false, true} {
					js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: fl, Limit: 10, Reverse: rev})
					if err != nil {
						t.Fatal(err)
					}
					var ids []string
					for _, j := range js {
						ids = append(ids, j.ID)
					}
					sort.Strings(ids)
					if w := want(st, f.q, f.k); !slices.Equal(ids, w) {
						t.Errorf("%s: %s queue %q kind %q (reverse %v): %v, want %v", when, st, f.q, f.k, rev, ids, w)
					}
				}
				n, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: fl})
				if err != nil || n != int64(len(want(st, f.q, f.k))) {
					t.Errorf("%s: count of %s queue %q kind %q: %d %v, want %d", when, st, f.q, f.k, n, err, len(want(st, f.q, f.k)))
				}
			}
		}
		if err := s.JobCountReconcile(ctx); err != nil {
			t.Fatal(err)
		}
		counts, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{})
		if err != nil || counts["a"][sluicetype.StateCompleted] != 2 || counts["a"][sluicetype.StateAvailable] != 2 || counts["b"][sluicetype.StateAvailable] != 4 {
			t.Errorf("%s: reconciled counters %v %v", when, counts, err)
		}
		for _, st := range []string{"available", "completed"} {
			for _, k := range []string{redis.Key(s, "sq", st, "a"), redis.Key(s, "sq", st, "b"), redis.Key(s, "sk", st, "k"), redis.Key(s, "sk", st, "x:y")} {
				if n, _ := c.Exists(ctx, k).Result(); n != 0 {
					t.Errorf("%s: %s exists", when, k)
				}
			}
		}
	}
	check("version 4", s)

	// The namespace as version 3 left it: each sqk entry in sq and sk.
	pairs, err := c.SMembers(ctx, redis.Key(s, "qk")).Result()
	if err != nil || len(pairs) != 4 {
		t.Fatalf("qk: %v %v, want 4 pairs", pairs, err)
	}
	for _, st := range []string{"available", "completed"} {
		for _, pk := range pairs {
			q, k, _ := strings.Cut(pk, "\x1f")
			ms, err := c.ZRange(ctx, redis.Key(s, "sqk", st, pk), 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				for _, key := range []string{redis.Key(s, "sq", st, q), redis.Key(s, "sk", st, k)} {
					if err := c.ZAdd(ctx, key, goredis.Z{Member: m}).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := c.Del(ctx, redis.Key(s, "sqk", st, pk)).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Del(ctx, redis.Key(s, "qk")).Err(); err != nil {
		t.Fatal(err)
	}
	check("version 4, migrated from 3", migrateFrom(t, s, u, 3))
}

// migratedStore opens a store in a namespace of its own, created at this
// build's version, and its URL.
func migratedStore(t *testing.T) (*redis.Store, string) {
	t.Helper()
	u := redistest.URL(t)
	s, err := redis.Open(context.Background(), u, redis.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, u
}

// migrateFrom puts s's namespace (at URL u) at schema version v, checks
// that Open refuses it without migration, and opens it migrated.
func migrateFrom(t *testing.T, s *redis.Store, u string, v int) *redis.Store {
	t.Helper()
	ctx := context.Background()
	if err := redis.Client(s).Set(ctx, redis.Key(s, "schema"), v, 0).Err(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("version %d", v)
	if _, err := redis.Open(ctx, u, redis.Options{}); !errors.Is(err, redis.ErrNoStore) || !strings.Contains(err.Error(), want) {
		t.Fatalf("open of a version %d namespace without migration: %v, want it refused", v, err)
	}
	s2, err := redis.Open(ctx, u, redis.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

// TestStatusAndMigrate: Status reads a namespace without creating it;
// Migrate brings it to this build's version.
func TestStatusAndMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := redistest.URL(t)
	st, err := redis.Status(ctx, u)
	if err != nil || st.Exists || st.Version != 0 || st.Latest != redis.SchemaVersion || len(st.Pending) != redis.SchemaVersion {
		t.Fatalf("status of an empty namespace: %+v %v", st, err)
	}
	if st2, _ := redis.Status(ctx, u); st2.Exists {
		t.Fatal("Status created the namespace")
	}
	s, err := redis.Open(ctx, u, redis.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err = redis.Status(ctx, u); err != nil || !st.Exists || st.Version != redis.SchemaVersion || len(st.Pending) != 0 {
		t.Fatalf("status after migrate: %+v %v", st, err)
	}
}

// kill inserts jobs of queue q and archives each with the error pattern
// pattern(i) (as the engine's finish would).
func kill(t *testing.T, s backend.Store, q string, n int, pattern func(i int) string) {
	t.Helper()
	ctx := context.Background()
	var js []*backend.JobInsertParams
	for i := range n {
		js = append(js, &backend.JobInsertParams{ID: fmt.Sprintf("%s-%04d", q, i), Queue: q, Kind: "k", Payload: []byte(`{}`),
			SchemaVersion: 1, MaxAttempts: 1})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: js}); err != nil {
		t.Fatal(err)
	}
	c, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: q, WorkerID: "w", LeaseID: "l", Limit: n,
		Kinds: map[string]int{"k": 1}, LeaseDuration: time.Minute})
	if err != nil || len(c.Jobs) != n {
		t.Fatalf("claimed %d, %v", len(c.Jobs), err)
	}
	for _, j := range c.Jobs {
		i := 0
		fmt.Sscanf(j.ID[len(q)+1:], "%d", &i)
		p := pattern(i)
		if _, err := s.JobFinish(ctx, &backend.JobFinishParams{JobRef: backend.JobRef{ID: j.ID, LeaseID: "l", Fence: j.Fence},
			To: sluicetype.StateArchived, Reason: sluicetype.ReasonAttemptsExhausted, Charge: backend.ChargeAttempt, Finalize: true,
			Error:  &backend.ErrorWrite{Entry: sluicetype.AttemptError{Message: p}, Keep: 20, LastError: p, Pattern: p},
			Counts: []backend.CountDelta{{Queue: q, From: sluicetype.StateRunning, To: sluicetype.StateArchived, N: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGroupBulkWalksTheGroup: a bulk batch over an error group walks the
// group's own jobs, so three jobs of a rare group among two hundred dead
// jobs are retried in one batch of window 10 (a walk of every job would
// take twenty batches).
func TestGroupBulkWalksTheGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	kill(t, s, "q", 203, func(i int) string {
		if i%100 == 1 { // 1, 101, 201
			return "rare <n>"
		}
		return "common <n>"
	})
	spec, err := backend.SpecFor(sluicetype.ActionRetry)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := spec.Narrow(sluicetype.Filter{Queues: []string{"q"}, ErrorPattern: "rare <n>"})
	op, err := s.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op", Action: sluicetype.ActionRetry, Selector: sel, Matched: 3})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := s.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "h", TTL: time.Minute})
	if err != nil || lease == nil {
		t.Fatalf("claim: %v %v", lease, err)
	}
	res, err := s.OperationProcessBatch(ctx, &backend.OperationProcessBatchParams{ID: op.ID, Holder: "h", Fence: lease.Fence,
		Spec: spec, Selector: sel, Cutoff: op.CreatedAt, Limit: 10, Window: 10, TTL: time.Minute,
		Event: backend.EventWrite{Kind: sluicetype.EventRetried, Actor: "maya", To: sluicetype.StateAvailable}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Exhausted || res.Operation.Succeeded != 3 {
		t.Fatalf("one batch of window 10: exhausted %v, succeeded %d; want the 3 jobs of the group and the end", res.Exhausted, res.Operation.Succeeded)
	}
	n, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateAvailable}}})
	if err != nil || n != 3 {
		t.Fatalf("available after the retry: %d %v", n, err)
	}
}

// TestClaimReplyIsTheStoredJob: the claim sends each job as it read it and
// JobClaim applies the claim's writes; on every path of the script (a
// plain job, one with a deadline, one that failed before and so carries
// its error entries and pattern) that gives the job as stored.
func TestClaimReplyIsTheStoredJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	dl := time.Now().Add(time.Hour)
	insert := func(js ...*backend.JobInsertParams) {
		t.Helper()
		res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: js})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	claim := func(q string) []*sluicetype.Job {
		t.Helper()
		c, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: q, WorkerID: "w", LeaseID: "l-" + q, Limit: 10,
			Kinds: map[string]int{"k": 1}, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return c.Jobs
	}
	// "failed" fails once (an error entry, its pattern) and comes back.
	insert(&backend.JobInsertParams{ID: "failed", Queue: "f", Kind: "k", Payload: []byte(`{"n":3}`), SchemaVersion: 1, MaxAttempts: 3})
	j := claim("f")[0]
	if _, err := s.JobFinish(ctx, &backend.JobFinishParams{JobRef: backend.JobRef{ID: j.ID, LeaseID: "l-f", Fence: j.Fence},
		To: sluicetype.StateAvailable, Charge: backend.ChargeAttempt, Schedule: backend.ScheduleNow,
		Error:  &backend.ErrorWrite{Entry: sluicetype.AttemptError{Attempt: 1, Message: "boom 1"}, Keep: 20, LastError: "boom 1", Pattern: "boom <n>"},
		Counts: []backend.CountDelta{{Queue: "f", From: sluicetype.StateRunning, To: sluicetype.StateAvailable, N: 1}}}); err != nil {
		t.Fatal(err)
	}
	insert(&backend.JobInsertParams{ID: "plain", Queue: "q", Kind: "k", Payload: []byte(`{"n":1}`), SchemaVersion: 1, MaxAttempts: 3,
		Metadata: []byte(`{"m":1}`), Tags: []string{"t"}, Priority: 2, Fingerprint: "fp1"},
		&backend.JobInsertParams{ID: "deadline", Queue: "q", Kind: "k", Payload: []byte(`{"n":2}`), SchemaVersion: 1, MaxAttempts: 3, Deadline: &dl})
	for _, tc := range []struct {
		name, q string
		ids     []string
		errs    int
	}{
		{"plain and deadline", "q", []string{"plain", "deadline"}, 0},
		{"failed before", "f", []string{"failed"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := claim(tc.q)
			if len(got) != len(tc.ids) {
				t.Fatalf("claimed %d jobs, want %d", len(got), len(tc.ids))
			}
			for _, j := range got {
				if !slices.Contains(tc.ids, j.ID) {
					t.Fatalf("claimed %s, want one of %v", j.ID, tc.ids)
				}
				if len(j.Errors) != tc.errs {
					t.Errorf("job %s: %d error entries, want %d", j.ID, len(j.Errors), tc.errs)
				}
				stored, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: j.ID, IncludePayload: true})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(stored, j) {
					t.Errorf("claim returned\n%+v\nstored\n%+v", j, stored)
				}
			}
		})
	}
}

// TestLongBatchesGoAsChunks: a claim, a completion or an insert longer
// than one script takes goes as several scripts and still does what one
// would: the claim takes never-crashed jobs first and suspects up to the
// limit over all its chunks, the completion and the insert answer every
// item.
func TestLongBatchesGoAsChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	// Five jobs crash once (their first run is charged a crash) and come
	// back; 700 never ran.
	var crashed []*backend.JobInsertParams
	for i := range 5 {
		crashed = append(crashed, &backend.JobInsertParams{ID: fmt.Sprintf("c%d", i), Queue: "q", Kind: "k", Payload: []byte(`{}`), SchemaVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: crashed}); err != nil {
		t.Fatal(err)
	}
	c, err := s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "l0", Limit: 5, LeaseDuration: time.Minute})
	if err != nil || len(c.Jobs) != 5 {
		t.Fatalf("claimed %d, %v", len(c.Jobs), err)
	}
	for _, j := range c.Jobs {
		if _, err := s.JobFinish(ctx, &backend.JobFinishParams{JobRef: backend.JobRef{ID: j.ID, LeaseID: "l0", Fence: j.Fence},
			To: sluicetype.StateAvailable, Charge: backend.ChargeCrash, Schedule: backend.ScheduleNow,
			Counts: []backend.CountDelta{{Queue: "q", From: sluicetype.StateRunning, To: sluicetype.StateAvailable, N: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	var fresh []*backend.JobInsertParams
	for i := range 700 {
		fresh = append(fresh, &backend.JobInsertParams{ID: fmt.Sprintf("j%03d", i), Queue: "q", Kind: "k", Payload: []byte(`{}`), SchemaVersion: 1, MaxAttempts: 3})
	}
	ins, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: fresh})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range ins {
		if r.Err != nil || r.Job == nil || r.Job.ID != fresh[i].ID {
			t.Fatalf("insert result %d: %+v", i, r)
		}
	}
	// 650 never-crashed jobs fill the first chunks; 50 and two suspects
	// the last.
	c, err = s.JobClaim(ctx, &backend.JobClaimParams{Queue: "q", WorkerID: "w", LeaseID: "l1", Limit: 760, Suspects: 2, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	seen, suspects := map[string]bool{}, 0
	for _, j := range c.Jobs {
		if seen[j.ID] {
			t.Fatalf("job %s claimed twice", j.ID)
		}
		seen[j.ID] = true
		if j.CrashAttempt == 1 {
			suspects++
		}
	}
	if len(c.Jobs) != 702 || suspects != 2 {
		t.Fatalf("claimed %d jobs, %d of them suspects; want 702 and 2", len(c.Jobs), suspects)
	}
	items := make([]backend.JobCompleteItem, len(c.Jobs))
	for i, j := range c.Jobs {
		items[i] = backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: "l1", Fence: j.Fence}}
	}
	items = append(items, backend.JobCompleteItem{JobRef: backend.JobRef{ID: "c0", LeaseID: "other", Fence: 9}})
	res, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items, EndProbation: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range res[:len(res)-1] {
		if e != nil {
			t.Fatalf("item %d: %v", i, e)
		}
	}
	if !errors.Is(res[len(res)-1], sluicetype.ErrLeaseLost) {
		t.Fatalf("the last item, on no lease: %v", res[len(res)-1])
	}
	n, _, err := s.JobCountMatching(ctx, &backend.JobCountMatchingParams{Filter: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateCompleted}}})
	if err != nil || n != 702 {
		t.Fatalf("completed: %d %v; want 702", n, err)
	}
}

// archivedRetry creates and claims a bulk retry of queue q's archived
// jobs (matched of them) and returns what runs its batches: each from
// after, of up to limit jobs, failing the test on an error.
func archivedRetry(t *testing.T, s *redis.Store, q string, matched int64) func(after string, limit int) *backend.OperationBatchResult {
	t.Helper()
	ctx := context.Background()
	spec, err := backend.SpecFor(sluicetype.ActionRetry)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := spec.Narrow(sluicetype.Filter{Queues: []string{q}, States: []sluicetype.State{sluicetype.StateArchived}})
	op, err := s.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op", Action: sluicetype.ActionRetry, Selector: sel, Matched: matched})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := s.OperationClaim(ctx, &backend.OperationClaimParams{Holder: "h", TTL: time.Minute})
	if err != nil || lease == nil {
		t.Fatalf("claim: %v %v", lease, err)
	}
	return func(after string, limit int) *backend.OperationBatchResult {
		t.Helper()
		res, err := s.OperationProcessBatch(ctx, &backend.OperationProcessBatchParams{ID: op.ID, Holder: "h", Fence: lease.Fence,
			After: after, Spec: spec, Selector: sel, Cutoff: op.CreatedAt, Limit: limit, Window: 10000, TTL: time.Minute,
			Event: backend.EventWrite{Kind: sluicetype.EventRetried, Actor: "maya", To: sluicetype.StateAvailable}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// TestBulkBatchWritesIndexesOnce: a batch gathers its jobs' index writes
// and writes them once per key when its walk ends, timing them for the
// operation's next batch (zp), rather than every eight jobs so that the
// clock saw them. With a budget never spent, the second batch of 64 dead
// jobs of one queue, kind and error group moves their entries out of the
// five archived sets (st, sq, sk, eg, egi) and into the four available
// ones (sqk, eg, egi, av) with one call a set; written every eight jobs
// it took eight.
func TestBulkBatchWritesIndexesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := redisserver.Private(t, redisserver.Options{}).Addr()
	s := redistest.NewOn(t, "redis://"+addr+"/0")
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	redis.SetBatchBudget(s, time.Second)
	kill(t, s, "q", 200, func(int) string { return "boom <n>" })
	batch := archivedRetry(t, s, "q", 200)
	first := batch("", 64)
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	second := batch(first.Cursor, 64)
	stats := commandStats(t, c)
	if n := second.Operation.Succeeded - first.Operation.Succeeded; n != 64 {
		t.Fatalf("the second batch retried %d jobs; want 64 (its budget is never spent)", n)
	}
	if stats["zrem"] != 5 || stats["zadd"] != 4 {
		t.Fatalf("the second batch wrote its index entries in %d ZREM and %d ZADD calls; want 5 and 4 (one a set)", stats["zrem"], stats["zadd"])
	}
	// Written once, the moves are still every job's: the indexes and the
	// counters hold the 128 retried jobs as available, the rest archived.
	byQueue, err := s.JobCountByQueue(ctx, &backend.JobCountByQueueParams{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	for st, want := range map[sluicetype.State]int64{sluicetype.StateAvailable: 128, sluicetype.StateArchived: 72} {
		if got := byQueue["q"][st]; got != want {
			t.Errorf("counter of %s: %d; want %d", st, got, want)
		}
		js, err := s.JobListPage(ctx, &backend.JobListPageParams{Filter: sluicetype.Filter{Queues: []string{"q"}, States: []sluicetype.State{st}}, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(js)) != want {
			t.Errorf("listing of %s: %d jobs; want %d", st, len(js), want)
		}
	}
}

// TestBulkBatchStoppedEarlyReadsNoJobTwice: a batch script out of time
// stops where its walk got to, every job it read already written, so the
// next batch starts past them. With a budget that is always spent, each
// batch stops at its first look at the clock (every 8 jobs): 100 dead
// jobs take 13 batches (8 × 12, then the last 4 and the end), and every
// job is retried once.
func TestBulkBatchStoppedEarlyReadsNoJobTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	redis.SetBatchBudget(s, -time.Microsecond)
	kill(t, s, "q", 100, func(int) string { return "boom <n>" })
	batch := archivedRetry(t, s, "q", 100)
	cursor, batches, prev := "", 0, int64(0)
	for {
		res := batch(cursor, 1000)
		batches++
		if n := res.Operation.Succeeded - prev; !res.Exhausted && n != 8 {
			t.Fatalf("batch %d changed %d jobs; want 8 (it stops at its first look at the clock)", batches, n)
		}
		prev, cursor = res.Operation.Succeeded, res.Cursor
		if res.Exhausted || batches > 100 {
			break
		}
	}
	if batches != 13 || prev != 100 {
		t.Fatalf("%d batches retried %d jobs; want 13 batches and 100 jobs", batches, prev)
	}
	for i := range 100 {
		id := fmt.Sprintf("q-%04d", i)
		j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.JobEventList(ctx, &backend.JobEventListParams{JobID: id})
		if err != nil {
			t.Fatal(err)
		}
		retried := 0
		for _, e := range evs {
			if e.Kind == sluicetype.EventRetried {
				retried++
			}
		}
		if j.State != sluicetype.StateAvailable || retried != 1 {
			t.Fatalf("%s: %s, %d retried events; want available, retried once", id, j.State, retried)
		}
	}
}
