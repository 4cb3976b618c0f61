package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// fullJob returns a job with every field set to a non-zero value.
func fullJob() *Job {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	deadline := t0.Add(time.Hour)
	attemptedAt := t0.Add(time.Minute)
	finalizedAt := t0.Add(2 * time.Minute)
	return &Job{
		ID:             "0194f0c2-0000-7000-8000-000000000001",
		Queue:          "billing",
		Kind:           "charge",
		Payload:        json.RawMessage(`{"customer":42}`),
		SchemaVersion:  2,
		Metadata:       json.RawMessage(`{"trace":"abc"}`),
		Tags:           []string{"vip", "eu"},
		Priority:       3,
		State:          StateArchived,
		Attempt:        5,
		MaxAttempts:    5,
		CrashAttempt:   1,
		Fingerprint:    "ff00",
		Fence:          9,
		ScheduledAt:    t0,
		Deadline:       &deadline,
		Timeout:        30 * time.Second,
		CreatedAt:      t0.Add(-time.Hour),
		AttemptedAt:    &attemptedAt,
		AttemptedBy:    "worker-1",
		StateChangedAt: finalizedAt,
		FinalizedAt:    &finalizedAt,
		TerminalReason: ReasonAttemptsExhausted,
		Lease:          &Lease{ID: "lease-1", WorkerID: "worker-1", Fence: 9, ExpiresAt: t0.Add(30 * time.Second)},
		Errors: []AttemptError{
			{Attempt: 1, At: t0, Worker: "worker-1", Message: "boom", Trace: "trace-1"},
			{Attempt: 2, Crash: true, At: t0.Add(time.Second), Worker: "worker-2", Message: "panic", Trace: "trace-2"},
		},
		Version:      12,
		Checkpoint:   json.RawMessage(`{"steps":[{"name":"a","result":1}]}`),
		Wait:         &WaitSummary{Kind: WaitKindChildren, Step: 2, Name: "all", Done: 3, Total: 5},
		DeadLetterOf: "dead-1",
		RetryOf:      "orig-1",
		SupersededBy: "new-1", UniqueKey: "0123456789abcdef0123456789abcdef",
		HeldBy: "limit kind billing.charge 5/5",
	}
}

func TestFullJobSetsEveryField(t *testing.T) {
	t.Parallel()
	// Keeps TestJobClone honest: a field added to Job must be set in
	// fullJob, so the clone tests see it.
	v := reflect.ValueOf(fullJob()).Elem()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("fullJob leaves Job.%s zero; set it", v.Type().Field(i).Name)
		}
	}
}

func TestJobClone(t *testing.T) {
	t.Parallel()
	orig := fullJob()
	want := fullJob()
	c := orig.Clone()
	if c == orig {
		t.Fatal("Clone returned the same pointer")
	}
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("clone differs:\n got  %+v\n want %+v", c, orig)
	}

	// No reference-typed field may be shared.
	ov, cv := reflect.ValueOf(orig).Elem(), reflect.ValueOf(c).Elem()
	for i := range ov.NumField() {
		name := ov.Type().Field(i).Name
		of, cf := ov.Field(i), cv.Field(i)
		switch of.Kind() {
		case reflect.Pointer, reflect.Map:
			if !of.IsNil() && of.Pointer() == cf.Pointer() {
				t.Errorf("Job.%s is shared between the clone and the original", name)
			}
		case reflect.Slice:
			if of.Len() > 0 && of.Index(0).Addr().Pointer() == cf.Index(0).Addr().Pointer() {
				t.Errorf("Job.%s's backing array is shared", name)
			}
		}
	}

	// Mutating the clone leaves the original as it was.
	c.Payload[2] = 'X'
	c.Payload = append(c.Payload, ' ')
	c.Metadata[2] = 'X'
	c.Checkpoint[2] = 'X'
	c.Tags[0] = "changed"
	c.Tags = append(c.Tags, "more")
	c.Errors[0].Message = "changed"
	c.Errors[1].Trace = "changed"
	c.Errors = append(c.Errors, AttemptError{Message: "more"})
	c.Wait.Done = 99
	c.Lease.ID = "stolen"
	c.Lease.Fence = 100
	c.Lease.ExpiresAt = time.Time{}
	*c.Deadline = c.Deadline.Add(time.Hour)
	*c.AttemptedAt = time.Time{}
	*c.FinalizedAt = time.Time{}
	c.State = StateAvailable
	c.Attempt = 0
	if !reflect.DeepEqual(orig, want) {
		t.Fatalf("mutating the clone changed the original:\n got  %+v\n want %+v", orig, want)
	}

	// And the other way round.
	c2 := orig.Clone()
	orig.Payload[2] = 'Y'
	orig.Tags[1] = "changed"
	orig.Errors[0].Attempt = 99
	orig.Lease.WorkerID = "other"
	*orig.Deadline = time.Time{}
	if !reflect.DeepEqual(c2, want) {
		t.Fatalf("mutating the original changed the clone:\n got  %+v\n want %+v", c2, want)
	}
}

func TestJobCloneNilsAndEmpties(t *testing.T) {
	t.Parallel()
	var nilJob *Job
	if nilJob.Clone() != nil {
		t.Fatal("nil.Clone() != nil")
	}
	j := &Job{ID: "a", State: StateAvailable}
	c := j.Clone()
	if !reflect.DeepEqual(c, j) {
		t.Fatalf("clone of a sparse job differs: %+v vs %+v", c, j)
	}
	if c.Payload != nil || c.Tags != nil || c.Errors != nil || c.Lease != nil || c.Deadline != nil ||
		c.AttemptedAt != nil || c.FinalizedAt != nil || c.Metadata != nil || c.Checkpoint != nil {
		t.Fatalf("nil fields became non-nil: %+v", c)
	}
	// Empty slices stay empty (Clone may turn them nil: every such field
	// is omitempty, so the JSON is the same).
	j = &Job{Tags: []string{}, Errors: []AttemptError{}, Payload: json.RawMessage{}}
	c = j.Clone()
	if len(c.Tags) != 0 || len(c.Errors) != 0 || len(c.Payload) != 0 {
		t.Fatalf("empty slices gained elements: %+v", c)
	}
}

func makeErrors(n int) []AttemptError {
	errs := make([]AttemptError, n)
	for i := range errs {
		errs[i] = AttemptError{Attempt: i + 1, Message: fmt.Sprintf("error %d", i+1)}
	}
	return errs
}

func TestCapErrors(t *testing.T) {
	t.Parallel()
	if MaxKeptErrors < 2 {
		t.Fatalf("MaxKeptErrors = %d; keeping the first and the latest needs 2", MaxKeptErrors)
	}
	for _, n := range []int{0, 1, 2, MaxKeptErrors - 1, MaxKeptErrors, MaxKeptErrors + 1, MaxKeptErrors + 2, 2 * MaxKeptErrors, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			in := makeErrors(n)
			snapshot := makeErrors(n)
			got := CapErrors(in)
			if !reflect.DeepEqual(in, snapshot) {
				t.Fatal("CapErrors changed its input")
			}
			if n <= MaxKeptErrors {
				if !reflect.DeepEqual(got, in) {
					t.Fatalf("CapErrors of %d errors changed them", n)
				}
				return
			}
			if len(got) != MaxKeptErrors {
				t.Fatalf("kept %d errors, want %d", len(got), MaxKeptErrors)
			}
			if got[0].Attempt != 1 {
				t.Errorf("first kept is attempt %d, want the first (1)", got[0].Attempt)
			}
			// Then the latest MaxKeptErrors-1, in order.
			for i, e := range got[1:] {
				want := n - (MaxKeptErrors - 1) + i + 1
				if e.Attempt != want {
					t.Errorf("kept[%d] is attempt %d, want %d", i+1, e.Attempt, want)
				}
			}
			if got[len(got)-1].Attempt != n {
				t.Errorf("latest kept is %d, want %d", got[len(got)-1].Attempt, n)
			}
			// Appending to the result must not write into the input.
			_ = append(got, AttemptError{Attempt: -1})
			if !reflect.DeepEqual(in, snapshot) {
				t.Fatal("appending to CapErrors' result changed its input")
			}
		})
	}
	if CapErrors(nil) != nil {
		t.Error("CapErrors(nil) != nil")
	}

	// Capping repeatedly as errors arrive keeps the first and the latest.
	var acc []AttemptError
	for i := 1; i <= 3*MaxKeptErrors; i++ {
		acc = CapErrors(append(acc, AttemptError{Attempt: i}))
		if len(acc) > MaxKeptErrors {
			t.Fatalf("after %d errors kept %d", i, len(acc))
		}
		if acc[0].Attempt != 1 || acc[len(acc)-1].Attempt != i {
			t.Fatalf("after %d errors: first %d latest %d", i, acc[0].Attempt, acc[len(acc)-1].Attempt)
		}
	}
	for i := 1; i < len(acc); i++ {
		if acc[i].Attempt != 3*MaxKeptErrors-(MaxKeptErrors-1)+i {
			t.Fatalf("incremental capping kept %+v", acc)
		}
	}
}

func eventKinds(ev []Event) []EventKind {
	out := make([]EventKind, len(ev))
	for i, e := range ev {
		out[i] = e.Kind
	}
	return out
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ptr := func(tm time.Time) *time.Time { return &tm }

	t.Run("completed happy path is derived from columns", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j1", State: StateCompleted, CreatedAt: at(0), AttemptedAt: ptr(at(5)), AttemptedBy: "w1", FinalizedAt: ptr(at(7))}
		got := Timeline(j, nil)
		want := []Event{
			{JobID: "j1", Kind: EventEnqueued, At: at(0), To: StateAvailable},
			{JobID: "j1", Kind: EventClaimed, At: at(5), Actor: "w1", To: StateRunning, Attempt: 1},
			{JobID: "j1", Kind: EventCompleted, At: at(7), Actor: "w1", From: StateRunning, To: StateCompleted},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Timeline:\n got  %+v\n want %+v", got, want)
		}
	})

	t.Run("earlier runs' claims are derived from their errors", func(t *testing.T) {
		t.Parallel()
		errs := []AttemptError{
			{Attempt: 1, At: at(10), Worker: "w1", Message: "refused"},
			{Attempt: 2, At: at(20), Worker: "w2", Message: "refused"},
			{Attempt: 3, At: at(30), Worker: "w1", Message: "refused"},
		}
		j := &Job{ID: "jd", State: StateArchived, Attempt: 3, CreatedAt: at(0), AttemptedAt: ptr(at(28)), AttemptedBy: "w1", Errors: errs}
		stored := []Event{
			{JobID: "jd", Kind: EventFailed, At: at(10), Actor: "w1", Attempt: 1},
			{JobID: "jd", Kind: EventFailed, At: at(20), Actor: "w2", Attempt: 2},
			{JobID: "jd", Kind: EventArchived, At: at(30), Actor: "w1", Attempt: 3},
		}
		got := Timeline(j, stored)
		want := []EventKind{EventEnqueued, EventClaimed, EventFailed, EventClaimed, EventFailed, EventClaimed, EventArchived}
		if !reflect.DeepEqual(eventKinds(got), want) {
			t.Fatalf("kinds = %v, want %v", eventKinds(got), want)
		}
		for i, n := range map[int]int{1: 1, 3: 2} {
			if c := got[i]; c.Attempt != n || c.Actor != errs[n-1].Worker || c.Message != DerivedClaimNote {
				t.Errorf("claim of run %d = %+v", n, c)
			}
		}
		if got[5].Message != "" || !got[5].At.Equal(at(28)) {
			t.Errorf("the last run's claim = %+v, want the attempted time", got[5])
		}
	})

	t.Run("an entry that kept its start places its claim there", func(t *testing.T) {
		t.Parallel()
		errs := []AttemptError{
			{Attempt: 1, At: at(10), Started: ptr(at(8)), Worker: "w1", Message: "refused"},
			{Attempt: 2, At: at(20), Worker: "w2", Message: "refused"},
			{Attempt: 3, At: at(30), Started: ptr(at(28)), Worker: "w1", Message: "refused"},
		}
		j := &Job{ID: "js", State: StateArchived, Attempt: 3, CreatedAt: at(0), AttemptedAt: ptr(at(28)), AttemptedBy: "w1", Errors: errs}
		got := Timeline(j, nil)
		claims := map[int]Event{}
		for _, e := range got {
			if e.Kind == EventClaimed {
				claims[e.Attempt] = e
			}
		}
		for n, want := range map[int]struct {
			at   time.Time
			note string
		}{1: {at(8), ""}, 2: {at(20), DerivedClaimNote}, 3: {at(28), ""}} {
			if c := claims[n]; !c.At.Equal(want.at) || c.Message != want.note {
				t.Errorf("claim of run %d = %+v, want at %v with note %q", n, c, want.at, want.note)
			}
		}
	})

	t.Run("never claimed", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j2", State: StateAvailable, CreatedAt: at(0)}
		got := Timeline(j, nil)
		if !reflect.DeepEqual(eventKinds(got), []EventKind{EventEnqueued}) || !got[0].At.Equal(at(0)) {
			t.Fatalf("Timeline = %+v", got)
		}
	})

	t.Run("stored events merged and sorted", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j3", State: StateCompleted, Attempt: 2, CreatedAt: at(0), AttemptedAt: ptr(at(30)), AttemptedBy: "w2", FinalizedAt: ptr(at(35))}
		// Stored out of order on purpose.
		stored := []Event{
			{JobID: "j3", Kind: EventRetried, At: at(25), Actor: "alice", From: StateArchived, To: StateAvailable},
			{JobID: "j3", Kind: EventFailed, At: at(10), Actor: "w1", From: StateRunning, To: StateRetryable, Attempt: 1, Message: "boom"},
			{JobID: "j3", Kind: EventArchived, At: at(20), Actor: "w1", From: StateRunning, To: StateArchived, Attempt: 2},
		}
		storedCopy := append([]Event(nil), stored...)
		got := Timeline(j, stored)
		wantKinds := []EventKind{EventEnqueued, EventFailed, EventArchived, EventRetried, EventClaimed, EventCompleted}
		if !reflect.DeepEqual(eventKinds(got), wantKinds) {
			t.Fatalf("kinds = %v, want %v", eventKinds(got), wantKinds)
		}
		for i := 1; i < len(got); i++ {
			if got[i].At.Before(got[i-1].At) {
				t.Fatalf("not sorted at %d: %+v", i, got)
			}
		}
		if got[1].Message != "boom" || got[3].Actor != "alice" {
			t.Errorf("stored events lost their fields: %+v", got)
		}
		if got[4].Attempt != 3 || got[4].Actor != "w2" {
			t.Errorf("derived claim = %+v, want attempt 3 by w2", got[4])
		}
		if !reflect.DeepEqual(stored, storedCopy) {
			t.Error("Timeline reordered the caller's stored slice")
		}
	})

	t.Run("stored claim at the attempted time is not duplicated", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j4", State: StateRunning, CreatedAt: at(0), AttemptedAt: ptr(at(5)), AttemptedBy: "w1"}
		// Same instant in another location must still count as equal.
		stored := []Event{{JobID: "j4", Kind: EventClaimed, At: at(5).In(time.FixedZone("X", 3600)), Actor: "w1", To: StateRunning, Attempt: 1}}
		got := Timeline(j, stored)
		if !reflect.DeepEqual(eventKinds(got), []EventKind{EventEnqueued, EventClaimed}) {
			t.Fatalf("kinds = %v", eventKinds(got))
		}
	})

	t.Run("claim at another time is added", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j5", State: StateRunning, CreatedAt: at(0), AttemptedAt: ptr(at(50)), AttemptedBy: "w2"}
		stored := []Event{{JobID: "j5", Kind: EventClaimed, At: at(5), Actor: "w1"}}
		got := Timeline(j, stored)
		if !reflect.DeepEqual(eventKinds(got), []EventKind{EventEnqueued, EventClaimed, EventClaimed}) {
			t.Fatalf("kinds = %v", eventKinds(got))
		}
		if got[2].Actor != "w2" || !got[2].At.Equal(at(50)) {
			t.Fatalf("derived claim = %+v", got[2])
		}
	})

	t.Run("completed without finalized_at derives no completion", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j6", State: StateCompleted, CreatedAt: at(0), AttemptedAt: ptr(at(1))}
		if got := eventKinds(Timeline(j, nil)); !reflect.DeepEqual(got, []EventKind{EventEnqueued, EventClaimed}) {
			t.Fatalf("kinds = %v", got)
		}
	})

	t.Run("dead job derives no completion", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j7", State: StateArchived, CreatedAt: at(0), AttemptedAt: ptr(at(1)), FinalizedAt: ptr(at(2))}
		stored := []Event{{JobID: "j7", Kind: EventArchived, At: at(2)}}
		if got := eventKinds(Timeline(j, stored)); !reflect.DeepEqual(got, []EventKind{EventEnqueued, EventClaimed, EventArchived}) {
			t.Fatalf("kinds = %v", got)
		}
	})

	t.Run("equal times keep their order", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j8", State: StateCancelled, CreatedAt: at(0)}
		stored := []Event{
			{JobID: "j8", Kind: EventHeld, At: at(3)},
			{JobID: "j8", Kind: EventReleased, At: at(3)},
			{JobID: "j8", Kind: EventCancelled, At: at(3)},
		}
		want := []EventKind{EventEnqueued, EventHeld, EventReleased, EventCancelled}
		if got := eventKinds(Timeline(j, stored)); !reflect.DeepEqual(got, want) {
			t.Fatalf("kinds = %v, want %v", got, want)
		}
	})

	t.Run("many events sort", func(t *testing.T) {
		t.Parallel()
		j := &Job{ID: "j9", State: StateRetryable, CreatedAt: at(0)}
		var stored []Event
		for i := 100; i >= 1; i-- {
			stored = append(stored, Event{JobID: "j9", Kind: EventFailed, At: at(i), Attempt: i})
		}
		got := Timeline(j, stored)
		if len(got) != 101 || got[0].Kind != EventEnqueued {
			t.Fatalf("len %d first %v", len(got), got[0].Kind)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Attempt != i {
				t.Fatalf("position %d holds attempt %d", i, got[i].Attempt)
			}
		}
	})
}

// TestLastErrorText: one text for a job's last error wherever it is
// listed: its latest entry, or for a death without one the words its
// timeline and error group use.
func TestLastErrorText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		j    Job
		want string
	}{
		{"with errors", Job{State: StateArchived, Errors: []AttemptError{{Message: "a"}, {Message: "b"}}}, "b"},
		{"past its deadline at the claim", Job{State: StateArchived, TerminalReason: ReasonDeadlineExceeded}, MessageDeadlineBeforeRun},
		{"held by a quarantine", Job{State: StateQuarantined, TerminalReason: "held"}, "held"},
		{"cancelled", Job{State: StateCancelled, TerminalReason: "cancelled"}, ""},
		{"available", Job{State: StateAvailable}, ""},
	} {
		if got := c.j.LastErrorText(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
