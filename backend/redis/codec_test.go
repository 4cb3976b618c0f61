package redis

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestUnpackStrings: what the server's cmsgpack.pack makes of nested
// tables of strings reads back as the reply of the same tables would,
// across every length boundary of the format's strings and arrays.
func TestUnpackStrings(t *testing.T) {
	t.Parallel()
	u := os.Getenv("SLUICE_TEST_REDIS")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	o, err := goredis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Redis at %s: %v", u, err)
		}
		t.Skipf("SKIP: no Redis at %s: %v", u, err)
	}
	// Truncated or foreign input is an error, never a panic.
	packed, err := c.Eval(ctx, "return cmsgpack.pack({{'abc', string.rep('z', 300)}})", nil).Text()
	if err != nil {
		t.Fatal(err)
	}
	for i := range len(packed) {
		if _, err := unpackStrings(packed[:i]); err == nil {
			t.Fatalf("%d of %d bytes read without an error", i, len(packed))
		}
	}
	if _, err := unpackStrings("\x01"); err == nil {
		t.Fatal("a number read as a string")
	}
	// Each case is a Lua expression of a table of tables of strings.
	for _, tc := range []struct{ name, table string }{
		{"empty", `{}`},
		{"empty inner", `{{}, {{}, {}}}`},
		{"string lengths", `{{'', 'a', string.rep('b', 31), string.rep('c', 32), string.rep('d', 255), string.rep('e', 256),
			string.rep('f', 65535), string.rep('g', 65536)}}`},
		{"bytes", `{{'\0\1\31\255', '{"a":"\\u0000"}'}}`},
		{"array lengths", `(function() local t = {}; for n = 14, 17 do local a = {}; for i = 1, n do a[i] = tostring(i) end; t[#t + 1] = a end
			local big = {}; for i = 1, 70000 do big[i] = 'x' end; t[#t + 1] = big; return t end)()`},
		{"a claim's shape", `{{{'id', 'j1', 'q', 'bench', 'p', '{}'}, {}}, {{'id', 'j2'}, {'0000000000000000001{"message":"boom"}'}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, err := c.Eval(ctx, "return "+tc.table, nil).Result()
			if err != nil {
				t.Fatal(err)
			}
			packed, err := c.Eval(ctx, "return cmsgpack.pack("+tc.table+")", nil).Text()
			if err != nil {
				t.Fatal(err)
			}
			got, err := unpackStrings(packed)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("unpacked %s, want %s", short(got), short(want))
			}
		})
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
