package sluicetype

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var queryNow = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

const testFP = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func tp(t time.Time) *time.Time         { return &t }
func dp(d time.Duration) *time.Duration { return &d }

// filtersEqual compares two filters, times as instants.
func filtersEqual(a, b Filter) bool {
	times := func(f *Filter) []*time.Time {
		return []*time.Time{f.CreatedAfter, f.CreatedBefore, f.FinalizedAfter, f.FinalizedBefore}
	}
	ta, tb := times(&a), times(&b)
	for i := range ta {
		if (ta[i] == nil) != (tb[i] == nil) || ta[i] != nil && !ta[i].Equal(*tb[i]) {
			return false
		}
	}
	a.CreatedAfter, a.CreatedBefore, a.FinalizedAfter, a.FinalizedBefore = nil, nil, nil, nil
	b.CreatedAfter, b.CreatedBefore, b.FinalizedAfter, b.FinalizedBefore = nil, nil, nil, nil
	return reflect.DeepEqual(a, b)
}

func TestParseQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		q    string
		want Filter
	}{
		{"empty", "", Filter{}},
		{"blank", " \t\n ", Filter{}},
		{"state", "state:archived", Filter{States: []State{StateArchived}}},
		{"states repeated", "state:archived state:cancelled", Filter{States: []State{StateArchived, StateCancelled}}},
		{"states comma", "state:archived,cancelled", Filter{States: []State{StateArchived, StateCancelled}}},
		{"states deduped", "state:archived,cancelled state:archived", Filter{States: []State{StateArchived, StateCancelled}}},
		{"every state", "state:scheduled,available,running,retryable,completed,archived,quarantined,undecodable,cancelled",
			Filter{States: AllStates}},
		{"queue", "queue:billing", Filter{Queues: []string{"billing"}}},
		{"queue with colon and dots", "queue:eu.billing:v2", Filter{Queues: []string{"eu.billing:v2"}}},
		{"queues", "queue:a,b queue:c", Filter{Queues: []string{"a", "b", "c"}}},
		{"kind", "kind:email", Filter{Kinds: []string{"email"}}},
		{"kinds quoted list", `kind:"email","sms"`, Filter{Kinds: []string{"email", "sms"}}},
		{"id", "id:job-1", Filter{IDs: []string{"job-1"}}},
		{"ids", "id:a,b id:c~retry~0011aabb", Filter{IDs: []string{"a", "b", "c~retry~0011aabb"}}},
		{"id with comma quoted", `id:"a,b"`, Filter{IDs: []string{"a,b"}}},
		{"fingerprint", "fingerprint:" + testFP, Filter{Fingerprint: testFP}},
		{"fingerprint upper case", "fingerprint:" + strings.ToUpper(testFP), Filter{Fingerprint: testFP}},
		{"tag", "tag:vip tag:eu,us", Filter{Tags: []string{"vip", "eu", "us"}}},
		{"error bare", "error:timeout", Filter{Error: "timeout"}},
		{"error quoted", `error:"connection refused"`, Filter{Error: "connection refused"}},
		{"error escaped quotes", `error:"say \"hi\""`, Filter{Error: `say "hi"`}},
		{"error escaped backslash", `error:"C:\\temp"`, Filter{Error: `C:\temp`}},
		{"error escapes", `error:"a\nb\tc\rd"`, Filter{Error: "a\nb\tc\rd"}},
		{"error comma is literal", "error:a,b", Filter{Error: "a,b"}},
		{"error colon is literal", "error:dial:tcp", Filter{Error: "dial:tcp"}},
		{"error backslash bare is literal", `error:a\b`, Filter{Error: `a\b`}},
		{"error unicode", `error:"café ☕"`, Filter{Error: "café ☕"}},
		{"payload", "payload.customer:42", Filter{Payload: []PathMatch{{"customer", "42"}}}},
		{"payload deep", "payload.customer.id:42 payload.a_b-c.D9:x", Filter{Payload: []PathMatch{{"customer.id", "42"}, {"a_b-c.D9", "x"}}}},
		{"payload quoted", `payload.name:"Ada Lovelace"`, Filter{Payload: []PathMatch{{"name", "Ada Lovelace"}}}},
		{"payload comma literal", `payload.x:1,2`, Filter{Payload: []PathMatch{{"x", "1,2"}}}},
		{"meta", "meta.tenant:acme meta.region:eu", Filter{Meta: []PathMatch{{"tenant", "acme"}, {"region", "eu"}}}},
		{"created after relative h", "created>24h", Filter{CreatedAfter: tp(queryNow.Add(-24 * time.Hour))}},
		{"created after relative m", "created>15m", Filter{CreatedAfter: tp(queryNow.Add(-15 * time.Minute))}},
		{"created after relative d", "created>7d", Filter{CreatedAfter: tp(queryNow.Add(-7 * 24 * time.Hour))}},
		{"created after relative s", "created>30s", Filter{CreatedAfter: tp(queryNow.Add(-30 * time.Second))}},
		{"created after relative w", "created>2w", Filter{CreatedAfter: tp(queryNow.Add(-14 * 24 * time.Hour))}},
		{"created after relative compound", "created>1d12h", Filter{CreatedAfter: tp(queryNow.Add(-36 * time.Hour))}},
		{"created after zero", "created>0s", Filter{CreatedAfter: tp(queryNow)}},
		{"created before rfc3339", "created<2024-05-01T12:00:00Z", Filter{CreatedBefore: tp(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))}},
		{"created before offset", "created<2024-05-01T14:00:00+02:00", Filter{CreatedBefore: tp(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))}},
		{"created before nanos", "created<2024-05-01T12:00:00.123456789Z", Filter{CreatedBefore: tp(time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC))}},
		{"created date", "created>2024-05-01", Filter{CreatedAfter: tp(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC))}},
		{"finalized range", "finalized>2024-05-01T00:00:00Z finalized<1h", Filter{
			FinalizedAfter:  tp(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)),
			FinalizedBefore: tp(queryNow.Add(-time.Hour)),
		}},
		{"superseded", "superseded:include", Filter{IncludeSuperseded: true}},
		{"expires within", "expires<24h", Filter{ExpiresWithin: dp(24 * time.Hour)}},
		{"expires within compound", "state:archived expires<1d12h", Filter{States: []State{StateArchived}, ExpiresWithin: dp(36 * time.Hour)}},
		{"design example", `state:archived queue:billing kind:email error:"timeout" payload.customer:42`, Filter{
			States: []State{StateArchived}, Queues: []string{"billing"}, Kinds: []string{"email"},
			Error: "timeout", Payload: []PathMatch{{"customer", "42"}},
		}},
		{"extra white space", "  state:archived \t\n queue:q  ", Filter{States: []State{StateArchived}, Queues: []string{"q"}}},
		{"unicode space separates", "state:archived\u00a0queue:q", Filter{States: []State{StateArchived}, Queues: []string{"q"}}},
		{"quoted value with space inside list", `id:"a b",c`, Filter{IDs: []string{"a b", "c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseQueryAt(tt.q, queryNow)
			if err != nil {
				t.Fatalf("ParseQueryAt(%q): %v", tt.q, err)
			}
			if !filtersEqual(got, tt.want) {
				t.Fatalf("ParseQueryAt(%q)\n got %#v\nwant %#v", tt.q, got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("parsed filter does not validate: %v", err)
			}
			for _, p := range []*time.Time{got.CreatedAfter, got.CreatedBefore, got.FinalizedAfter, got.FinalizedBefore} {
				if p != nil && p.Location() != time.UTC {
					t.Errorf("time %v not in UTC", p)
				}
			}
			back, err := ParseQueryAt(got.String(), queryNow.Add(time.Hour))
			if err != nil {
				t.Fatalf("re-parse %q: %v", got.String(), err)
			}
			if !reflect.DeepEqual(back, got) {
				t.Fatalf("round trip via %q\n got %#v\nwant %#v", got.String(), back, got)
			}
		})
	}
}

func TestParseQueryUsesNow(t *testing.T) {
	t.Parallel()
	before := time.Now()
	f, err := ParseQuery("created>1h")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if f.CreatedAfter.Before(before.Add(-time.Hour)) || f.CreatedAfter.After(after.Add(-time.Hour)) {
		t.Fatalf("created>1h gave %v, want about %v", f.CreatedAfter, before.Add(-time.Hour))
	}
}

func TestParseQueryErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		q    string
		want []string // substrings of the message
	}{
		{"bare word", "timeout", []string{`term "timeout" has no field: write field:value`}},
		{"bare word after term", `state:archived connection`, []string{`term "connection" has no field`}},
		{"bare quoted phrase", `"connection refused"`, []string{`has no field`}},
		{"no field name", ":archived", []string{`has no field`}},
		{"unknown field", "status:archived", []string{`unknown field "status"`, "known fields:", "state", "payload.<path>", "created>", "superseded"}},
		{"unknown field case", "State:archived", []string{`unknown field "State"`}},
		{"expires after", "expires>1d", []string{"expires takes <", "expires<24h"}},
		{"expires with a colon", "expires:1d", []string{"expires takes <"}},
		{"expires zero", "expires<0s", []string{"longer than 0"}},
		{"expires a time", "expires<2024-05-01", []string{`duration "2024-05-01"`}},
		{"expires too long", "expires<99999999999999999999w", []string{"longer than"}},
		{"unknown state", "state:dead", []string{`"state:dead"`, `unknown state "dead"`, "valid states: scheduled, available, running, retryable, completed, archived, quarantined, undecodable, cancelled"}},
		{"unknown state in list", "state:archived,dead", []string{`unknown state "dead"`}},
		{"deleted is not stored", "state:deleted", []string{`unknown state "deleted"`}},
		{"bad queue name", "queue:a/b", []string{`queue name "a/b" does not match`}},
		{"bad kind name", "kind:-x", []string{`kind name "-x"`}},
		{"bad tag name", `tag:"two words"`, []string{`tag name "two words"`}},
		{"fingerprint short", "fingerprint:abc", []string{`"fingerprint:abc"`, "64 lower-case hex"}},
		{"fingerprint not hex", "fingerprint:" + strings.Repeat("g", 64), []string{"64 lower-case hex"}},
		{"fingerprint too long", "fingerprint:" + testFP + "0", []string{"64 lower-case hex"}},
		{"fingerprint list", "fingerprint:" + testFP + "," + testFP, []string{"64 lower-case hex"}},
		{"fingerprint twice", "fingerprint:" + testFP + " fingerprint:" + testFP, []string{"given twice"}},
		{"error twice", "error:a error:b", []string{`"error:b"`, "given twice"}},
		{"created twice", "created>1h created>2h", []string{"created> is given twice"}},
		{"superseded twice", "superseded:include superseded:include", []string{"given twice"}},
		{"bad time", "created>yesterday", []string{`"created>yesterday"`, "RFC 3339", "24h"}},
		{"bad time fraction", "created>1.5h", []string{"RFC 3339"}},
		{"bad time negative", "created>-1h", []string{"RFC 3339"}},
		{"bad time unit", "created>3y", []string{"RFC 3339"}},
		{"bad rfc3339", "created<2024-13-01T00:00:00Z", []string{"RFC 3339"}},
		{"duration too long", "created>999999999999999999999d", []string{"longer than"}},
		{"duration over cap", "created>36501d", []string{"longer than"}},
		{"duration sum over cap", "created>36000d36000d", []string{"longer than"}},
		{"created with colon", "created:24h", []string{"created takes > or <"}},
		{"state with >", "state>archived", []string{"state takes ':'"}},
		{"payload with <", "payload.a<1", []string{"payload.a takes ':'"}},
		{"superseded other", "superseded:exclude", []string{"superseded takes only the value include"}},
		{"unterminated quote", `error:"connection refused`, []string{`"error:\"connection refused"`, "unterminated quote"}},
		{"unterminated after escape", `error:"abc\`, []string{"unterminated quote"}},
		{"unknown escape", `error:"a\qb"`, []string{`unknown escape \q`}},
		{"quote mid value", `error:abc"def"`, []string{"a quote may only open a value"}},
		{"text after quote", `error:"abc"def`, []string{`unexpected 'd' after a quoted value`}},
		{"comma after quote single", `error:"abc",x`, []string{`unexpected ','`}},
		{"empty value", "queue:", []string{`"queue:"`, "empty value"}},
		{"empty value before next", "queue: kind:x", []string{"empty value"}},
		{"empty quoted value", `error:""`, []string{"empty value"}},
		{"empty list item", "state:archived,,cancelled", []string{"empty value"}},
		{"trailing comma", "state:archived,", []string{"empty value"}},
		{"payload without path", "payload:42", []string{"payload needs a path"}},
		{"meta without path", "meta:x", []string{"meta needs a path"}},
		{"payload empty path", "payload.:42", []string{"path is empty"}},
		{"payload empty key", "payload.a..b:42", []string{`key "" does not match`}},
		{"payload bad key", "payload.a$b:42", []string{`key "a$b" does not match`}},
		{"meta bad key", "meta.a b:1", []string{"has no field"}},
		{"invalid utf-8", "error:\xff", []string{"not valid UTF-8"}},
		{"nul in error", "error:\x00", []string{`query term "error:\x00"`, "NUL character (U+0000) at byte 0"}},
		{"nul in quoted payload", `payload.a:"x` + "\x00" + `y"`, []string{"NUL character (U+0000) at byte 1"}},
		{"nul in id list", "id:a,b\x00", []string{"NUL character (U+0000) at byte 1"}},
		{"nul in meta", "meta.k:\x00\x00", []string{"NUL character (U+0000)"}},
		{"too many ids", "id:" + manyIDs(1001), []string{"1001 ids; at most 1000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := ParseQueryAt(tt.q, queryNow)
			if err == nil {
				t.Fatalf("ParseQueryAt(%q) = %#v, want an error", tt.q, f)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !reflect.DeepEqual(f, Filter{}) {
				t.Errorf("failed parse returned a non-empty filter %#v", f)
			}
		})
	}
}

func manyIDs(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "job-" + strconv.Itoa(i)
	}
	return strings.Join(ids, ",")
}

func TestParseQueryMaxIDs(t *testing.T) {
	t.Parallel()
	f, err := ParseQueryAt("id:"+manyIDs(1000), queryNow)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.IDs) != 1000 {
		t.Fatalf("got %d ids", len(f.IDs))
	}
}

func TestFilterStringRoundTrip(t *testing.T) {
	t.Parallel()
	filters := []Filter{
		{},
		{States: []State{StateArchived}},
		{States: AllStates, Queues: []string{"a", "b.c", "d:e"}, Kinds: []string{"k-1"}},
		{IDs: []string{"plain", "with space", `with"quote`, `back\slash`, "comma,inside", "tab\there", "ünïcödé", "nl\nx", `"leading`}},
		{Fingerprint: testFP},
		{ExpiresWithin: dp(24 * time.Hour)},
		{ExpiresWithin: dp(90*time.Minute + 30*time.Second), States: []State{StateQuarantined}},
		{Tags: []string{"vip", "eu"}},
		{Error: "connection refused"},
		{Error: `say "hi"`},
		{Error: `C:\temp\x`},
		{Error: "a,b,c"},
		{Error: "line1\nline2\r\n\tindent"},
		{Error: `"`},
		{Error: `\`},
		{Error: "\u00a0nbsp\u2003em"},
		{Error: "\x01soh\x1b[31m\x7f"}, // control characters other than NUL are kept
		{Error: "503 \x1b]0;owned\x07\x1b[2J\u202eevil\u200b \\u001b"},
		{IDs: []string{"\u2028", "a\x1bb"}},
		{Error: "payload.x:1 state:archived"},
		{Payload: []PathMatch{{"customer", "42"}, {"customer.id", "a b"}, {"x", ""}}},
		{Meta: []PathMatch{{"tenant", "acme"}, {"k", `q"uote`}}},
		{CreatedAfter: tp(queryNow), CreatedBefore: tp(queryNow.Add(time.Hour))},
		{FinalizedAfter: tp(time.Date(2000, 1, 1, 0, 0, 0, 1, time.UTC)), FinalizedBefore: tp(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC))},
		{CreatedAfter: tp(time.Date(2024, 5, 1, 14, 0, 0, 0, time.FixedZone("x", 7200)))},
		{IncludeSuperseded: true},
		{
			States: []State{StateArchived, StateCancelled}, Queues: []string{"billing"}, Kinds: []string{"email"},
			IDs: []string{"j1"}, Fingerprint: testFP, Tags: []string{"t"}, Error: "timeout after 30s",
			Payload: []PathMatch{{"customer", "42"}}, Meta: []PathMatch{{"m", "v"}},
			CreatedAfter: tp(queryNow.Add(-time.Hour)), CreatedBefore: tp(queryNow),
			FinalizedAfter: tp(queryNow.Add(-2 * time.Hour)), FinalizedBefore: tp(queryNow.Add(-time.Minute)),
			IncludeSuperseded: true,
		},
	}
	for i, f := range filters {
		s := f.String()
		got, err := ParseQueryAt(s, queryNow)
		// An empty payload value cannot be written in the grammar.
		if len(f.Payload) == 3 {
			if err == nil {
				t.Errorf("%d: %q parsed, want the empty value refused", i, s)
			}
			continue
		}
		if err != nil {
			t.Errorf("%d: ParseQuery(%q): %v", i, s, err)
			continue
		}
		if !filtersEqual(got, f) {
			t.Errorf("%d: round trip via %q\n got %#v\nwant %#v", i, s, got, f)
		}
	}
}

// TestFilterNULRefusedAlike: a filter holding a NUL is refused by
// Validate, and its String by the parser, so the grammar and Validate
// agree on it.
func TestFilterNULRefusedAlike(t *testing.T) {
	t.Parallel()
	for _, f := range []Filter{
		{Error: "\x00nul\x7f"},
		{ErrorPattern: "a\x00"},
		{IDs: []string{"x\x00"}},
		{Payload: []PathMatch{{"p", "\x00"}}},
		{Meta: []PathMatch{{"m", "v\x00"}}},
	} {
		if err := f.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%#v: Validate() = %v, want ErrInvalid", f, err)
		}
		if _, err := ParseQueryAt(f.String(), queryNow); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "NUL character (U+0000)") {
			t.Errorf("ParseQuery(%q) = %v, want ErrInvalid naming the NUL", f.String(), err)
		}
	}
}

func TestFilterStringForm(t *testing.T) {
	t.Parallel()
	f := Filter{
		States: []State{StateArchived, StateCancelled}, Queues: []string{"billing"},
		Error: "connection refused", Payload: []PathMatch{{"customer", "42"}},
		CreatedAfter: tp(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)), IncludeSuperseded: true,
	}
	want := `state:archived,cancelled queue:billing error:"connection refused" payload.customer:42 created>2024-05-01T00:00:00Z superseded:include`
	if got := f.String(); got != want {
		t.Fatalf("String() = %q\nwant       %q", got, want)
	}
	if got := (Filter{}).String(); got != "" {
		t.Fatalf("empty filter String() = %q", got)
	}
}

func TestFilterIsEmpty(t *testing.T) {
	t.Parallel()
	now := queryNow
	tests := []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{IncludeSuperseded: true}, true},
		{Filter{States: []State{}}, true},
		{Filter{States: []State{StateArchived}}, false},
		{Filter{Queues: []string{"q"}}, false},
		{Filter{Kinds: []string{"k"}}, false},
		{Filter{IDs: []string{"i"}}, false},
		{Filter{Fingerprint: testFP}, false},
		{Filter{Tags: []string{"t"}}, false},
		{Filter{Error: "e"}, false},
		{Filter{Payload: []PathMatch{{"a", "b"}}}, false},
		{Filter{Meta: []PathMatch{{"a", "b"}}}, false},
		{Filter{CreatedAfter: &now}, false},
		{Filter{CreatedBefore: &now}, false},
		{Filter{FinalizedAfter: &now}, false},
		{Filter{FinalizedBefore: &now}, false},
	}
	for i, tt := range tests {
		if got := tt.f.IsEmpty(); got != tt.want {
			t.Errorf("%d: %#v.IsEmpty() = %v, want %v", i, tt.f, got, tt.want)
		}
	}
}

func TestFilterValidate(t *testing.T) {
	t.Parallel()
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "id" + strconv.Itoa(i)
		}
		return out
	}
	bad := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		f    Filter
		want string // "" for valid
	}{
		{"empty", Filter{}, ""},
		{"full", Filter{States: AllStates, Queues: []string{"q"}, Kinds: []string{"k"}, IDs: ids(1000), Fingerprint: testFP,
			Tags: []string{"t"}, Error: "anything at all", Payload: []PathMatch{{"a.b_c-d", ""}}, Meta: []PathMatch{{"k", "v"}}}, ""},
		{"bad state", Filter{States: []State{"dead"}}, `unknown state "dead"`},
		{"deleted state", Filter{States: []State{StateDeleted}}, `unknown state "deleted"`},
		{"bad queue", Filter{Queues: []string{"a b"}}, `queue name "a b"`},
		{"empty queue", Filter{Queues: []string{""}}, `queue name ""`},
		{"bad kind", Filter{Kinds: []string{"k/1"}}, `kind name "k/1"`},
		{"bad tag", Filter{Tags: []string{"t,u"}}, `tag name "t,u"`},
		{"too many ids", Filter{IDs: ids(1001)}, "1001 ids; at most 1000"},
		{"empty id", Filter{IDs: []string{"a", ""}}, "empty id"},
		{"upper fingerprint", Filter{Fingerprint: strings.ToUpper(testFP)}, "lower-case hex"},
		{"short fingerprint", Filter{Fingerprint: "abc"}, "lower-case hex"},
		{"bad payload path", Filter{Payload: []PathMatch{{"a..b", "1"}}}, "payload path"},
		{"empty payload path", Filter{Payload: []PathMatch{{"", "1"}}}, "payload path is empty"},
		{"bad meta path", Filter{Meta: []PathMatch{{"a b", "1"}}}, "meta path"},
		{"time out of range", Filter{CreatedAfter: &bad}, "outside the years"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.f.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}

// FuzzFilterValidateParses is FuzzParseQuery's converse: a filter that
// Validate accepts is written by String in a form the parser reads back to
// it, so the parser refuses nothing Validate takes (a NUL, say, is refused
// by both). Each fuzzed text goes into every field that takes free text,
// one field at a time; the empty value, which the grammar cannot write,
// is left out.
func FuzzFilterValidateParses(f *testing.F) {
	for _, s := range []string{"x", "a b", "\x00", "\x01\x1b[31m\x7f", `say "hi"`, `C:\temp`, "\u00a0\u2028", "a,b", "\xff", "\n\t\r", `{"p":[1,2]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if v == "" {
			return
		}
		for _, fl := range []Filter{
			{Error: v},
			{ErrorPattern: v},
			{IDs: []string{v, "other"}},
			{Payload: []PathMatch{{"a.b", v}}},
			{Meta: []PathMatch{{"k", v}}},
			{Queues: []string{v}},
		} {
			if fl.Validate() != nil {
				continue
			}
			s := fl.String()
			got, err := ParseQueryAt(s, queryNow)
			if err != nil {
				t.Fatalf("%#v validates, but its String %q does not parse: %v", fl, s, err)
			}
			if !filtersEqual(got, fl) {
				t.Fatalf("round trip of %#v via %q gave %#v", fl, s, got)
			}
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	seeds := []string{
		"",
		"state:archived queue:billing kind:email error:\"timeout\" payload.customer:42",
		"state:archived,cancelled state:running",
		`error:"say \"hi\"" error2:x`,
		`error:"a\nb\\c"`,
		"id:\"a,b\",c tag:x",
		"fingerprint:" + testFP,
		"payload.a.b-c_d:1 meta.tenant:acme",
		"created>24h created<2024-05-01T12:00:00+02:00 finalized>7d finalized<2024-05-01",
		"created>1d12h30m15s",
		"superseded:include",
		"bare",
		"state:dead",
		`error:"unterminated`,
		"queue:\xff",
		"created>99999999999999999999w",
		"created<0000-01-01T00:00:00Z",
		"created<9999-12-31T23:59:59.999999999-23:59",
		"error:\u00a0x\u2028y",
		// Around the filter bounds.
		"queue:" + strings.TrimSuffix(strings.Repeat("q,", MaxFilterValues+1), ","),
		strings.Repeat("payload.a:1 ", MaxFilterPaths+1),
		"error:" + strings.Repeat("x", MaxFilterText+1),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		got, err := ParseQueryAt(q, queryNow)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseQueryAt(%q) error %v does not wrap ErrInvalid", q, err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("ParseQueryAt(%q) gave a filter that does not validate: %v", q, err)
		}
		s := got.String()
		back, err := ParseQueryAt(s, queryNow.Add(-time.Hour))
		if err != nil {
			t.Fatalf("ParseQueryAt(%q) ok, but its String %q does not parse: %v", q, s, err)
		}
		if !reflect.DeepEqual(back, got) {
			t.Fatalf("round trip of %q via %q\n got %#v\nwant %#v", q, s, back, got)
		}
		if back.String() != s {
			t.Fatalf("String not stable: %q then %q", s, back.String())
		}
	})
}

// TestQueryUnicodeEscape: \uXXXX reads one character, as the command line
// spells what it never sends to a terminal; anything else after \u is
// refused with the form to use.
func TestQueryUnicodeEscape(t *testing.T) {
	t.Parallel()
	f, err := ParseQueryAt(`error:"a\u001b[2Jb\u202E"`, queryNow)
	if err != nil || f.Error != "a\x1b[2Jb\u202e" {
		t.Fatalf("got %q, %v", f.Error, err)
	}
	for _, q := range []string{`error:"\u001"`, `error:"\u00zz"`, `error:"\ud800"`, `error:"x\u`} {
		if _, err := ParseQueryAt(q, queryNow); err == nil || !strings.Contains(err.Error(), `four hex digits`) {
			t.Errorf("%s: %v, want the \\u form refused", q, err)
		}
	}
	if s := (Filter{Error: "a\x1bb"}).String(); s != `error:"a\u001bb"` {
		t.Errorf("String() = %s", s)
	}
}
