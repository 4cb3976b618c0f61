package sqlite

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// marshalled is what the store writes: json.Marshal of real error lists.
func marshalled(t testing.TB) []string {
	at := time.Date(2026, 11, 30, 1, 22, 21, 905364298, time.UTC)
	lists := [][]sluicetype.AttemptError{
		{{Attempt: 1, At: at, Worker: "vm/6896/94d415e1", Message: "POST https://api.example.com/v1/charges: context deadline exceeded"}},
		{{Attempt: 1, At: at, Message: "quote \" backslash \\ slash / tab \t newline \n"},
			{Attempt: 2, Crash: true, At: at.Add(time.Second), Worker: "w", Message: "panic: boom", Trace: "goroutine 1 [running]:\n\tmain.go:12 +0x1d"}},
		{{Attempt: 3, At: at, Message: "<html> & \u2028 \u2029 é 日本 🚀 \x00 \x1b[2J \x1b]52;c;AAAA\x07"}},
		{{Attempt: 4, At: at, Message: "bad utf8 \xff\xfe here"}},
		{{Attempt: 0, At: time.Time{}}},
		{{Attempt: -1, At: at.In(time.FixedZone("x", 3600))}},
	}
	var out []string
	for _, l := range lists {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// sameAsEncodingJSON fails t unless the hand decoders give encoding/json's
// answer for s (or both refuse it).
func sameAsEncodingJSON(t *testing.T, s string) {
	t.Helper()
	var want []sluicetype.AttemptError
	wantErr := json.Unmarshal([]byte(s), &want)
	got, err := decodeAttemptErrors(s)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("errors %q: err %v, encoding/json err %v", s, err, wantErr)
	}
	if err == nil && !equalErrors(got, want) {
		t.Fatalf("errors %q:\n got %#v\nwant %#v", s, got, want)
	}

	// The latest error alone may be read from a list whose earlier
	// elements encoding/json refuses: a list row then still shows it.
	last, err := decodeLastAttemptError(s)
	if wantErr == nil && err != nil {
		t.Fatalf("last error %q: err %v, encoding/json took it", s, err)
	}
	if wantErr != nil {
		err = wantErr
	}
	if len(want) > 1 {
		want = want[len(want)-1:]
	}
	if err == nil && !equalErrors(last, want) {
		t.Fatalf("last error %q:\n got %#v\nwant %#v", s, last, want)
	}

	var wantTags []string
	wantErr = json.Unmarshal([]byte(s), &wantTags)
	tags, err := decodeTags(s)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("tags %q: err %v, encoding/json err %v", s, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(tags, wantTags) {
		t.Fatalf("tags %q: got %#v, want %#v", s, tags, wantTags)
	}
}

// equalErrors compares with time.Equal and the zone's offset: parsed
// times carry freshly made locations.
func equalErrors(a, b []sluicetype.AttemptError) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		_, xo := x.At.Zone()
		_, yo := y.At.Zone()
		if !x.At.Equal(y.At) || xo != yo {
			return false
		}
		x.At, y.At = time.Time{}, time.Time{}
		if x != y {
			return false
		}
	}
	return true
}

func TestListJSONFastPathTakesWhatTheStoreWrites(t *testing.T) {
	t.Parallel()
	for _, s := range marshalled(t) {
		if _, err := fastAttemptErrors(s); err != nil {
			t.Errorf("fast path refused the store's own output %q: %v", s, err)
		}
		sameAsEncodingJSON(t, s)
	}
	tags, _ := json.Marshal([]string{"a", "b \"c\"", "日本", "\x01"})
	if _, err := fastStrings(string(tags)); err != nil {
		t.Errorf("fast path refused tags %s: %v", tags, err)
	}
	sameAsEncodingJSON(t, string(tags))
}

func TestListJSONAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	cases := []string{
		`[]`, `null`, `[{}]`, ` []`, `[] `, `[{"attempt":1}]`,
		`[{"Attempt":2}]`, `[{"attempt":01}]`, `[{"attempt":1.0}]`, `[{"attempt":1e2}]`,
		`[{"attempt":-0}]`, `[{"attempt":99999999999999999999}]`, `[{"attempt":"1"}]`,
		`[{"crash":true}]`, `[{"crash":null}]`, `[{"crash":1}]`,
		`[{"at":"2026-11-30T01:02:03Z"}]`, `[{"at":"2026-11-30T01:02:03.5+01:00"}]`,
		`[{"at":"2026-11-30 01:02:03Z"}]`, `[{"at":"\u0032026-11-30T01:02:03Z"}]`, `[{"at":null}]`,
		`[{"message":"\ud83d\ude80 \ud800 \ud800\u0041 \u00e9 \/"}]`, `[{"message":"a\qb"}]`,
		`[{"message":"tab	raw"}]`, `[{"message":"\u12"}]`, `[{"message":null}]`,
		`[{"message":"x","message":"y"}]`, `[{"other":1}]`, `[{"message":"x"},]`,
		`[{"message":"x"}{"message":"y"}]`, `[{"message":"x"}`, `["a","b"]`, `["a",]`, `[1]`,
		`["\u00"]`, "[\"\xff\"]", `{}`, ``,
		`[{"attempt":1},{"attempt":2}]`, `[{"attempt":1},{"attempt":2,"other":3}]`, `[{"attempt":1},{"attempt":2}`,
		`[{"attempt":1,"message":"},{\"attempt\":9}"},{"attempt":2,"message":"},{\"attempt\":7"}]`,
		`[{"attempt":1},{"attempt":2}] `, `[{"attempt":1}, {"attempt":2}]`, `[{"attempt":1},{"attempt":x}]`, `[{"attempt":x},{"attempt":2}]`,
	}
	for _, s := range cases {
		sameAsEncodingJSON(t, s)
	}
}

func FuzzListJSON(f *testing.F) {
	for _, s := range marshalled(f) {
		f.Add(s)
	}
	f.Add(`["a","\u00e9"]`)
	f.Add(`[{"attempt":1,"crash":true,"at":"2026-11-30T01:02:03Z","message":"\ud800"}]`)
	f.Fuzz(func(t *testing.T, s string) {
		sameAsEncodingJSON(t, s)
	})
}

func TestListJSONFallbackIsReported(t *testing.T) {
	t.Parallel()
	if _, err := fastAttemptErrors(`[{"other":1}]`); !errors.Is(err, errNotFast) {
		t.Fatalf("unknown key: err %v, want errNotFast", err)
	}
	got, err := decodeAttemptErrors(`[{"other":1,"message":"kept"}]`)
	if err != nil || len(got) != 1 || got[0].Message != "kept" {
		t.Fatalf("fallback: %v %v", got, err)
	}
}

func BenchmarkDecodeAttemptErrors(b *testing.B) {
	s := marshalled(b)[0]
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeAttemptErrors(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var out []sluicetype.AttemptError
			if err := json.Unmarshal([]byte(s), &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
