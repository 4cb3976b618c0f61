package redis

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestUnpackJobs: a claim's jobs, packed by the server's cmsgpack.pack,
// read back as the same tables sent as a plain reply read through
// jobReply, across every length boundary of the format's strings and
// arrays; truncated or foreign input is an error, never a panic.
func TestUnpackJobs(t *testing.T) {
	t.Parallel()
	u := os.Getenv("SLUICE_TEST_REDIS")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	o, err := goredis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	// The 70,000-job table is read whole as plain Redis replies: on a
	// loaded machine that outlasts go-redis's 3 s read timeout.
	o.ReadTimeout = time.Minute
	c := goredis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s: %v", u, err)
		}
		t.Skipf("SKIP: no Redis at %s: %v", u, err)
	}
	packed, err := c.Eval(ctx, "return cmsgpack.pack({{{'id', 'j1', 'p', string.rep('z', 300)}, {}}})", nil).Text()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unpackJobs(packed, true); err != nil {
		t.Fatalf("whole: %v", err)
	}
	for i := range len(packed) {
		if _, err := unpackJobs(packed[:i], true); err == nil {
			t.Fatalf("%d of %d bytes read without an error", i, len(packed))
		}
	}
	for _, bad := range []string{"\x01", "\x91\x01", "\x91\x92\x01\x90", "\x91\x93\x90\x90\x90", "\x90\x90"} {
		if _, err := unpackJobs(bad, true); err == nil {
			t.Fatalf("%q read without an error", bad)
		}
	}
	// Each case is a Lua expression of a table of {fields, errors} pairs.
	const errEntry = `'0000000000000000001{"message":"boom"}'`
	for _, tc := range []struct{ name, table string }{
		{"no jobs", `{}`},
		{"empty job", `{{{}, {}}}`},
		{"a claim's shape", `{{{'id', 'j1', 'q', 'bench', 'k', 'email', 'p', '{}', 's', 'available', 'f', '3', 'sch', '0000000000000000042',
			'lid', 'l', 'lw', 'w', 'lx', '0000000000000000099', 'tg', '["a","b"]', 'dl', '', 'ata', '0000000000000000007'}, {}},
			{{'id', 'j2', 'm', '{"k":1}', 'cp', '{"version":1}', 'c', '2', 'ma', '25', 'fin', ''}, {` + errEntry + `, ` + errEntry + `}}}`},
		{"payload lengths", `(function() local t = {}; for _, n in ipairs({0, 1, 31, 32, 255, 256, 65535, 65536}) do
			t[#t + 1] = {{'id', 'j' .. n, 'p', string.rep('x', n)}, {}} end; return t end)()`},
		{"field counts", `(function() local t = {}; for n = 6, 9 do local f = {}; for i = 1, n do f[#f + 1] = 'x' .. i; f[#f + 1] = tostring(i) end
			t[#t + 1] = {f, {}} end; return t end)()`},
		{"an odd field out", `{{{'id', 'j1', 'q'}, {}}}`},
		{"error counts", `(function() local t = {}; for _, n in ipairs({15, 16, 70000}) do local e = {}; for i = 1, n do e[i] = ` + errEntry + ` end
			t[#t + 1] = {{'id', 'e' .. n}, e} end; return t end)()`},
		{"job counts", `(function() local t = {}; for i = 1, 70000 do t[i] = {{'id', tostring(i)}, {}} end; return t end)()`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plain, err := c.Eval(ctx, "return "+tc.table, nil).Result()
			if err != nil {
				t.Fatal(err)
			}
			packed, err := c.Eval(ctx, "return cmsgpack.pack("+tc.table+")", nil).Text()
			if err != nil {
				t.Fatal(err)
			}
			for _, payload := range []bool{true, false} {
				got, err := unpackJobs(packed, payload)
				if err != nil {
					t.Fatal(err)
				}
				arr, _ := plain.([]any)
				if len(got) != len(arr) {
					t.Fatalf("%d jobs unpacked, want %d", len(got), len(arr))
				}
				for i, x := range arr {
					want, err := jobReply(x, payload)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got[i], want) {
						t.Fatalf("job %d (payload %v): unpacked %s, want %s", i, payload, short(*got[i]), short(*want))
					}
				}
			}
		})
	}
}

// TestJobDecodersAgree: a job read from its hash as a map (jobFrom) and
// from the flat pairs of a reply (jobReply) is the same job, and every
// field the decoder knows lands somewhere.
func TestJobDecodersAgree(t *testing.T) {
	t.Parallel()
	fields := []string{"id", "j1", "q", "bench", "k", "email", "sv", "2", "pr", "-3", "s", "archived", "a", "4", "ma", "25",
		"c", "1", "fp", "abc", "f", "9", "sch", "0000000000000000042", "dl", "0000000000000000043", "to", "1000",
		"cr", "0000000000000000044", "ata", "0000000000000000045", "atb", "w1", "sca", "0000000000000000046",
		"fin", "0000000000000000047", "rs", "max_attempts", "v", "12", "dlo", "d0", "ro", "r0", "sb", "s0",
		"p", `{"n":1}`, "m", `{"m":1}`, "cp", `{"version":1}`, "tg", `["t"]`,
		"lid", "l1", "lw", "w2", "lx", "0000000000000000048", "uk", "k1", "us", "15"}
	flat := make([]any, len(fields))
	m := map[string]string{}
	for i, f := range fields {
		flat[i] = f
		if i%2 == 0 {
			m[f] = fields[i+1]
		}
	}
	errs := []string{`0000000000000000001{"message":"boom"}`}
	fromMap, err := jobFrom(m, errs)
	if err != nil {
		t.Fatal(err)
	}
	fromPairs, err := jobReply([]any{flat, []any{errs[0]}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromMap, fromPairs) {
		t.Fatalf("from the map %s,\nfrom pairs %s", short(*fromMap), short(*fromPairs))
	}
	// Every field set: no zero value is left in the job but the
	// workflow wait and the hold, which no hash field carries.
	v := reflect.ValueOf(*fromMap)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; name != "Wait" && name != "HeldBy" && v.Field(i).IsZero() {
			t.Errorf("field %s not set by any hash field", name)
		}
	}
}

// short is v printed, cut to a readable length.
func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
