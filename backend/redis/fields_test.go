package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/backend/redis/redistest"
	"github.com/sluicehq/sluice/sluicetype"
)

// fullJob is an insert with every field of JobInsertParams set.
func fullJob(id string) *backend.JobInsertParams {
	sched := time.Date(2200, 1, 2, 3, 4, 5, 6, time.UTC)
	dl := time.Date(2201, 1, 2, 3, 4, 5, 7, time.UTC)
	return &backend.JobInsertParams{
		ID: id, Queue: "fields", Kind: "every", Payload: json.RawMessage(`{"to":"someone"}`), SchemaVersion: 3,
		Metadata: json.RawMessage(`{"trace":"t1"}`), Tags: []string{"a", "b"}, Priority: 7, MaxAttempts: 9,
		Fingerprint: "fp-" + id, Delay: 90 * time.Second, ScheduledAt: &sched, Deadline: &dl, Timeout: 1500 * time.Millisecond,
	}
}

// TestInsertWritesTheFieldTable: the hash luaInsert writes for a job with
// every field set holds exactly the fields JobInsertMany takes it to
// have written (insertedFields, the payload besides, less the empty ones
// and those at their default), each one a field of the table (jobFields)
// with the value Go expects; and the hash decodes to the job the insert
// returned and the parameters it was given. A field one side writes and
// the other does not know fails here.
func TestInsertWritesTheFieldTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	jp := fullJob("every-field")
	res, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{jp}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	got, err := redis.Client(s).HGetAll(ctx, redis.Key(s, "job", jp.ID)).Result()
	if err != nil {
		t.Fatal(err)
	}
	table := redis.JobFieldDefaults()
	for k := range got {
		if _, ok := table[k]; !ok {
			t.Errorf("the script wrote field %q, which the field table lacks", k)
		}
	}
	if got[redis.FieldState] != string(sluicetype.StateScheduled) {
		t.Fatalf("state %q, want scheduled (scheduled_at is in the future)", got[redis.FieldState])
	}
	want := map[string]string{redis.FieldPayload: string(jp.Payload)}
	for k, v := range redis.InsertedFields(jp, got[redis.FieldState], got[redis.FieldScheduledAt], got[redis.FieldCreatedAt]) {
		if _, ok := table[k]; !ok {
			t.Errorf("Go takes the script to write field %q, which the field table lacks", k)
		}
		if v != "" && v != table[k] {
			want[k] = v
		}
	}
	for _, k := range sortedKeys(want, got) {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case !inGot:
			t.Errorf("field %q: Go expects %q, the script did not write it", k, w)
		case !inWant:
			t.Errorf("field %q: the script wrote %q, Go does not expect it", k, g)
		case g != w:
			t.Errorf("field %q: the script wrote %q, Go expects %q", k, g, w)
		}
	}

	j, err := redis.DecodeJobHash(got)
	if err != nil {
		t.Fatal(err)
	}
	back := *res[0].Job
	back.Payload = j.Payload
	if !reflect.DeepEqual(j, &back) {
		t.Errorf("the hash decodes to\n%+v\nthe insert returned\n%+v", j, &back)
	}
	if j.ID != jp.ID || j.Queue != jp.Queue || j.Kind != jp.Kind || string(j.Payload) != string(jp.Payload) ||
		j.SchemaVersion != jp.SchemaVersion || string(j.Metadata) != string(jp.Metadata) ||
		!reflect.DeepEqual(j.Tags, jp.Tags) || j.Priority != jp.Priority || j.MaxAttempts != jp.MaxAttempts ||
		j.Fingerprint != jp.Fingerprint || !j.ScheduledAt.Equal(*jp.ScheduledAt) || j.Deadline == nil ||
		!j.Deadline.Equal(*jp.Deadline) || j.Timeout != jp.Timeout {
		t.Errorf("the hash decodes to\n%+v\nfrom the parameters\n%+v", j, jp)
	}
}

func sortedKeys(ms ...map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestCorruptFieldIsAnError: a job hash field that does not parse (written
// directly, as a bug or a hand edit would) reaches the caller as an error
// naming the field, not as a zero value.
func TestCorruptFieldIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	for _, field := range []string{redis.FieldAttempt, redis.FieldFence, redis.FieldScheduledAt, redis.FieldDeadline,
		redis.FieldTimeout, redis.FieldTags} {
		t.Run(field, func(t *testing.T) {
			jp := fullJob("corrupt-" + field)
			if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{jp}}); err != nil {
				t.Fatal(err)
			}
			if err := redis.Client(s).HSet(ctx, redis.Key(s, "job", jp.ID), field, "not-a-number").Err(); err != nil {
				t.Fatal(err)
			}
			j, err := s.JobGetByID(ctx, &backend.JobGetByIDParams{ID: jp.ID})
			if err == nil {
				t.Fatalf("read without an error: %+v", j)
			}
			if !strings.Contains(err.Error(), "field "+field+":") {
				t.Errorf("the error does not name field %s: %v", field, err)
			}
			var se *strconv.NumError
			var je *json.SyntaxError
			if !errors.As(err, &se) && !errors.As(err, &je) {
				t.Errorf("the parse error is not wrapped: %v", err)
			}
		})
	}
}

// TestCorruptOperationFieldIsAnError: the same for a bulk operation's hash.
func TestCorruptOperationFieldIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.New(t)
	op, err := s.OperationInsert(ctx, &backend.OperationInsertParams{ID: "op-corrupt", Action: sluicetype.ActionRetry,
		Selector: sluicetype.Filter{States: []sluicetype.State{sluicetype.StateArchived}}, CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := redis.Client(s).HSet(ctx, redis.Key(s, "op", op.ID), redis.OpFieldMatched, "many").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.OperationGet(ctx, &backend.OperationGetParams{ID: op.ID})
	var se *strconv.NumError
	if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), "field "+redis.OpFieldMatched+":") {
		t.Fatalf("got %+v, %v; want an error naming field %s", got, err, redis.OpFieldMatched)
	}
}
