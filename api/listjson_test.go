package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// appendJobPage must write what encoding/json writes (marshalBody), byte
// for byte.

func TestJobPageShapeIsKnown(t *testing.T) {
	if !jobPageShapeOK {
		t.Fatalf("engine.JobPage, Job, Lease or AttemptError changed: GET /jobs answers go through encoding/json again.\n"+
			"Teach appendJob the change, then set jobPageShape to\n%s",
			typeShapes(reflect.TypeFor[engine.JobPage](), reflect.TypeFor[engine.Job](),
				reflect.TypeFor[engine.Lease](), reflect.TypeFor[engine.AttemptError](), reflect.TypeFor[engine.WaitSummary]()))
	}
}

// fullJob has every field set, with strings that need escaping.
func fullJob() *engine.Job {
	at := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	d := at("2026-12-01T10:00:00.5+01:00")
	a := at("2026-11-29T23:59:59.123456789Z")
	f := at("2026-11-30T00:00:00Z")
	return &engine.Job{
		ID: "0193a1b2-c3d4-7e5f-8a9b-000000000001", Queue: "billing", Kind: "invoice.generate",
		Payload: json.RawMessage(`{ "a" : [1, 2,
			3], "html": "<b>&</b>" }`),
		SchemaVersion: 2, Metadata: json.RawMessage(` {"k":"v"} `), Tags: []string{"customer-1", "é", `q"uote`},
		Priority: -3, State: engine.StateArchived, Attempt: 5, MaxAttempts: 5, CrashAttempt: 1,
		Fingerprint: "3f2a", Fence: 7, ScheduledAt: at("2026-11-29T12:00:00Z"), Deadline: &d,
		Timeout: 90 * time.Second, CreatedAt: at("2026-11-29T11:00:00.000001Z"), AttemptedAt: &a,
		AttemptedBy: "host-1/4242", StateChangedAt: a, FinalizedAt: &f,
		TerminalReason: engine.ReasonAttemptsExhausted,
		Lease:          &engine.Lease{ID: "lease-1", WorkerID: "w-1", Fence: 7, ExpiresAt: at("2026-11-29T23:00:00Z")},
		Errors: []engine.AttemptError{
			{Attempt: 1, Crash: true, At: a, Worker: "w-1", Message: "panic: <nil> map & more\n\tat x", Trace: "goroutine 1 [running]:\n\u2028\x01\xff"},
			{Attempt: 2, At: f, Message: `dial tcp 10.0.0.12:5432: connection refused`},
		},
		Version: 12, Checkpoint: json.RawMessage(`{"step":3}`),
		Wait:         &engine.WaitSummary{Kind: engine.WaitKindChildren, Step: 3, Name: `a"ll <b>`, Until: d, Signal: "pay\u2028ment", Done: 97, Total: 100},
		DeadLetterOf: "dl-1", RetryOf: "r-1", SupersededBy: "s-1", UniqueKey: "0123456789abcdef0123456789abcdef",
		HeldBy: "limit kind <b>&</b> 5/5",
	}
}

func TestAppendJobPageMatchesEncodingJSON(t *testing.T) {
	full := fullJob()
	v := reflect.ValueOf(full).Elem()
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("fullJob leaves %s zero: set it, so the test covers it", v.Type().Field(i).Name)
		}
	}
	bare := &engine.Job{ID: "b", Queue: "q", Kind: "k", State: engine.StateAvailable,
		Tags: []string{}, Payload: json.RawMessage{}, Errors: []engine.AttemptError{}}
	sleeping := &engine.Job{ID: "s", Queue: "q", Kind: "k", State: engine.StateScheduled,
		Wait: &engine.WaitSummary{Kind: engine.WaitKindSleep}}
	local := *full
	local.ScheduledAt = local.ScheduledAt.In(time.FixedZone("odd", -(9*3600 + 30*60 + 15)))
	pages := map[string]*engine.JobPage{
		"empty":   {Jobs: []*engine.Job{}},
		"nil":     {},
		"full":    {Jobs: []*engine.Job{full, bare}, Next: "bmV4dA", Prev: "cHJldg"},
		"bare":    {Jobs: []*engine.Job{bare, sleeping}, Next: "x"},
		"zone":    {Jobs: []*engine.Job{&local}},
		"nil job": {Jobs: []*engine.Job{nil, bare}},
	}
	for name, p := range pages {
		got, ok := appendJobPage(nil, p)
		if !ok {
			t.Errorf("%s: appendJobPage refused", name)
			continue
		}
		if want := marshalBody(p); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// What encoding/json refuses, appendJobPage leaves to it.
func TestAppendJobPageRefusesWhatJSONRefuses(t *testing.T) {
	bad := []func(j *engine.Job){
		func(j *engine.Job) { j.Payload = json.RawMessage(`{"a":`) },
		func(j *engine.Job) { j.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(j *engine.Job) { j.CreatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(j *engine.Job) { j.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600)) },
	}
	for i, mutate := range bad {
		j := fullJob()
		mutate(j)
		if _, err := json.Marshal(j); err == nil {
			t.Fatalf("case %d: encoding/json accepts it; the case is wrong", i)
		}
		if _, ok := appendJobPage(nil, &engine.JobPage{Jobs: []*engine.Job{j}}); ok {
			t.Errorf("case %d: appendJobPage wrote what encoding/json refuses", i)
		}
	}
}

func TestWriteJobPage(t *testing.T) {
	p := &engine.JobPage{Jobs: []*engine.Job{fullJob()}, Next: "n"}
	rec := httptest.NewRecorder()
	writeJobPage(rec, p)
	want := httptest.NewRecorder()
	writeJSON(want, http.StatusOK, p)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), want.Body.Bytes()) {
		t.Errorf("got %d %q %s\nwant %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, want.Body)
	}
	// A page encoding/json refuses gets its error answer, as before.
	j := fullJob()
	j.Payload = json.RawMessage(`{`)
	bad := &engine.JobPage{Jobs: []*engine.Job{j}}
	rec = httptest.NewRecorder()
	writeJobPage(rec, bad)
	if !strings.Contains(rec.Body.String(), "response not encodable") {
		t.Errorf("bad page answered %s", rec.Body)
	}
}
