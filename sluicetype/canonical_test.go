package sluicetype

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestCanonicalJSONRFC8785Examples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{
			// RFC 8785 section 3.2.2.
			name: "section 3.2.2 sample",
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			// RFC 8785 section 3.2.3: sorting by UTF-16 code units puts
			// the surrogate pair of U+1F600 before U+FB33.
			name: "section 3.2.3 sorting",
			in: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\"," +
				"\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\"," +
				"\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{
			// RFC 8785 appendix A (shortened: the structure of the
			// "complete example" with nested objects and arrays).
			name: "nested",
			in:   `{"b": {"y": [3, {"k": 1, "a": 2}], "x": {}}, "a": [], "c": [[]]}`,
			want: `{"a":[],"b":{"x":{},"y":[3,{"a":2,"k":1}]},"c":[[]]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("CanonicalJSON:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestCanonicalJSONNumbersRFCAppendixB runs RFC 8785 appendix B's table of
// IEEE-754 values and their JCS serialization.
func TestCanonicalJSONNumbersRFCAppendixB(t *testing.T) {
	t.Parallel()
	tests := []struct {
		bits uint64
		want string // "" for values that must be refused
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // -0
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x7fffffffffffffff, ""}, // NaN
		{0x7ff0000000000000, ""}, // Infinity
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatUint(tt.bits, 16), func(t *testing.T) {
			t.Parallel()
			f := math.Float64frombits(tt.bits)
			if tt.want == "" {
				if !math.IsNaN(f) && !math.IsInf(f, 0) {
					t.Fatalf("%x is finite; the table says it is refused", tt.bits)
				}
				// JSON has no spelling for these; the nearest is an
				// overflowing literal.
				if _, err := CanonicalJSON([]byte("1e400")); !errors.Is(err, ErrInvalid) {
					t.Fatalf("1e400: err = %v, want ErrInvalid", err)
				}
				return
			}
			if got := string(appendJCSNumber(nil, f)); got != tt.want {
				t.Errorf("appendJCSNumber(%x) = %s, want %s", tt.bits, got, tt.want)
			}
			// Through the parser, from Go's shortest text of the value.
			in := strconv.FormatFloat(f, 'e', -1, 64)
			got, err := CanonicalJSON([]byte(in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", in, err)
			}
			if string(got) != tt.want {
				t.Errorf("CanonicalJSON(%s) = %s, want %s", in, got, tt.want)
			}
		})
	}
}

func TestCanonicalJSONNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"1e+30", "1e+30"},
		{"1E30", "1e+30"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"0.000001", "0.000001"},
		{"1e-6", "0.000001"},
		{"1e-7", "1e-7"},
		{"0.0000001", "1e-7"},
		{"1.5e-7", "1.5e-7"},
		{"-1.5e-7", "-1.5e-7"},
		{"333333333.33333329", "333333333.3333333"},
		{"1e21", "1e+21"},
		{"1e20", "100000000000000000000"},
		{"123456789012345678901", "123456789012345680000"},
		{"1.2345e21", "1.2345e+21"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"-0e10", "0"},
		{"0", "0"},
		{"0.0", "0"},
		{"0e0", "0"},
		{"5e-324", "5e-324"},
		{"4.9e-324", "5e-324"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"1.7976931348623158e308", "1.7976931348623157e+308"}, // rounds down to MaxFloat64
		{"-1.7976931348623157e308", "-1.7976931348623157e+308"},
		{"1e-400", "0"}, // underflow rounds to zero, a finite double
		{"-1e-400", "0"},
		{"1", "1"},
		{"-1", "-1"},
		{"10", "10"},
		{"100.000", "100"},
		{"1.0e2", "100"},
		{"12345678901234567890", "12345678901234567000"},
		{"9007199254740993", "9007199254740992"},
		{"0.1", "0.1"},
		{"0.30000000000000004", "0.30000000000000004"},
		{"123.456e-2", "1.23456"},
		{"1E+2", "100"},
		{"1e-0", "1"},
		{"1e00000000000000000000001", "10"},
		{"[1.0, -2.50, 3e0]", "[1,-2.5,3]"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("CanonicalJSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalJSONStrings(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"plain", `"abc"`, `"abc"`},
		{"solidus unescaped", `"a\/b"`, `"a/b"`},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"short escapes", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{"short escapes from \\u", `"\u0008\u000C\u000a\u000D\u0009"`, `"\b\f\n\r\t"`},
		{"other controls lower-case hex", `"\u0000\u0001\u001F\u000b\u001e"`, `"\u0000\u0001\u001f\u000b\u001e"`},
		{"DEL literal", `"\u007f"`, "\"\x7f\""},
		{"non-ASCII literal", `"\u00e9\u20AC"`, `"é€"`},
		{"line separators literal", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"surrogate pair", `"\uD83D\uDE00"`, `"😀"`},
		{"raw UTF-8 kept", `"日本語 😀"`, `"日本語 😀"`},
		{"U+FFFD itself is fine", `"\ufffd�"`, `"��"`},
		{"noncharacter U+FFFF", `"\uffff"`, "\"\uffff\""},
		{"html not escaped", `"<a href='x'>&amp;</a>"`, `"<a href='x'>&amp;</a>"`},
		{"escaped key", `{"\u0061":1}`, `{"a":1}`},
		{"key with controls", `{"\u0001\n":1}`, `{"\u0001\n":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("CanonicalJSON(%s) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalJSONKeyOrder(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"ascii", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"byte order not locale", `{"b":1,"B":2,"a":3,"A":4,"_":5}`, `{"A":4,"B":2,"_":5,"a":3,"b":1}`},
		{"prefix first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"digits as strings", `{"10":1,"9":2,"1":3}`, `{"1":3,"10":1,"9":2}`},
		// U+FF61 (one UTF-16 unit 0xFF61) sorts after U+10000 (surrogates
		// 0xD800 0xDC00) in UTF-16 order, before it in code point or UTF-8
		// byte order.
		{"surrogate pair before BMP above U+D800", `{"\uff61":1,"\ud800\udc00":2}`, "{\"\U00010000\":2,\"\uff61\":1}"},
		{"emoji before CJK compatibility", `{"\ufb33":1,"😀":2,"€":3}`, "{\"€\":3,\"😀\":2,\"\ufb33\":1}"},
		{"BMP below surrogates before pairs", `{"😀":1,"\ud7ff":2}`, "{\"\ud7ff\":2,\"😀\":1}"},
		{"two pairs by low unit", `{"\ud83d\ude01":1,"\ud83d\ude00":2,"\ud83c\udf00":3}`, "{\"\U0001F300\":3,\"\U0001F600\":2,\"\U0001F601\":1}"},
		{"escaped control sorts low", `{"a":1,"\t":2," ":3}`, `{"\t":2," ":3,"a":1}`},
		{"nested objects sorted too", `[{"z":{"b":0,"a":0}},{"y":1,"x":[{"d":0,"c":0}]}]`, `[{"z":{"a":0,"b":0}},{"x":[{"c":0,"d":0}],"y":1}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("CanonicalJSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalJSONWhitespaceAndScalars(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } } \n", `{"a":[1,2],"b":{}}`},
		{"[ ]", "[]"},
		{"{\n}", "{}"},
		{"null", "null"},
		{" true ", "true"},
		{"false", "false"},
		{`"x"`, `"x"`},
		{"42", "42"},
		{"[null,true,false,\"\",0,{},[]]", `[null,true,false,"",0,{},[]]`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("CanonicalJSON(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"only whitespace", " \n\t"},
		{"truncated object", `{"a":1`},
		{"truncated array", `[1,2`},
		{"truncated string", `"abc`},
		{"truncated escape", `"abc\`},
		{"truncated literal", `tru`},
		{"bad literal", `nul`},
		{"capitalised literal", `True`},
		{"trailing comma in object", `{"a":1,}`},
		{"trailing comma in array", `[1,]`},
		{"leading comma", `[,1]`},
		{"missing colon", `{"a" 1}`},
		{"missing value", `{"a":}`},
		{"unquoted key", `{a:1}`},
		{"number key", `{1:1}`},
		{"single quotes", `{'a':1}`},
		{"trailing garbage", `{} x`},
		{"two values", `{}{}`},
		{"two scalars", `1 2`},
		{"comment", `{"a":1 /* c */}`},
		{"line comment", "// c\n{}"},
		{"BOM", "\ufeff{}"},
		{"form feed is not whitespace", "\f{}"},
		{"NBSP is not whitespace", "\u00a0{}"},
		{"NUL after value", "{}\x00"},
		{"duplicate key", `{"a":1,"a":2}`},
		{"duplicate key same value", `{"a":1,"a":1}`},
		{"duplicate key after unescaping", `{"a":1,"\u0061":2}`},
		{"duplicate key nested", `{"x":[{"b":1,"c":2,"b":3}]}`},
		{"duplicate empty key", `{"":1,"":2}`},
		{"raw control in string", "\"a\x01b\""},
		{"raw newline in string", "\"a\nb\""},
		{"raw tab in string", "\"a\tb\""},
		{"invalid escape", `"\x41"`},
		{"escaped single quote", `"\'"`},
		{"short unicode escape", `"\u12"`},
		{"bad hex in escape", `"\u12g4"`},
		{"lone high surrogate", `"\ud800"`},
		{"lone high surrogate then text", `"\ud800abc"`},
		{"high surrogate then BMP escape", `"\ud800\u0041"`},
		{"high surrogate twice", `"\ud800\ud800"`},
		{"high surrogate then other escape", `"\ud800\n"`},
		{"lone low surrogate", `"\udc00"`},
		{"reversed pair", `"\ude00\ud83d"`},
		{"lone surrogate in key", `{"\udfff":1}`},
		{"invalid UTF-8 byte", "\"\xff\""},
		{"invalid UTF-8 in key", "{\"\xfe\":1}"},
		{"invalid UTF-8 after escape", "\"\\n\xff\""},
		{"overlong encoding", "\"\xc0\xaf\""},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\""},
		{"truncated UTF-8", "\"\xe2\x82\""},
		{"above U+10FFFF", "\"\xf4\x90\x80\x80\""},
		{"invalid UTF-8 outside strings", "\xff"},
		{"leading zero", `01`},
		{"leading zeros negative", `-01`},
		{"plus sign", `+1`},
		{"bare minus", `-`},
		{"minus then space", `- 1`},
		{"leading dot", `.5`},
		{"trailing dot", `1.`},
		{"dot exponent", `1.e5`},
		{"bare exponent", `1e`},
		{"exponent sign only", `1e+`},
		{"hex", `0x10`},
		{"NaN", `NaN`},
		{"Infinity", `Infinity`},
		{"negative Infinity", `-Infinity`},
		{"overflow", `1e309`},
		{"overflow negative", `-1e400`},
		{"just above max double", `1.8e308`},
		{"overflow long integer", `1` + strings.Repeat("0", 400)},
		{"overflow in array", `[1, 2, 1e999]`},
		{"too deep arrays", strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)},
		{"too deep objects", strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON([]byte(tt.in))
			if err == nil {
				t.Fatalf("CanonicalJSON(%q) = %s, want an error", tt.in, got)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("CanonicalJSON(%q): err = %v, want it to wrap ErrInvalid", tt.in, err)
			}
			if got != nil {
				t.Fatalf("CanonicalJSON(%q) returned output %q with its error", tt.in, got)
			}
		})
	}
}

func TestCanonicalJSONDepthLimitBoundary(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	got, err := CanonicalJSON([]byte(in))
	if err != nil {
		t.Fatalf("nesting of exactly %d: %v", maxJSONDepth, err)
	}
	if string(got) != in {
		t.Fatal("deep arrays changed")
	}
}

func TestCompareUTF16(t *testing.T) {
	t.Parallel()
	// Against the definition: compare the UTF-16 encodings.
	want := func(x, y string) int {
		return slices.Compare(utf16.Encode([]rune(x)), utf16.Encode([]rune(y)))
	}
	pool := []rune{0, 'A', 'a', 0x7f, 0x80, 0xe9, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfb33, 0xff61, 0xfffd, 0xffff,
		0x10000, 0x1f600, 0x1f601, 0x1f300, 0x10fffe, 0x10ffff}
	rng := rand.New(rand.NewPCG(1, 2))
	randStr := func() string {
		r := make([]rune, rng.IntN(4))
		for i := range r {
			r[i] = pool[rng.IntN(len(pool))]
		}
		return string(r)
	}
	for range 20000 {
		x, y := randStr(), randStr()
		if got, w := compareUTF16([]byte(x), []byte(y)), want(x, y); got != w {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want %d", x, y, got, w)
		}
	}
}

// TestCanonicalJSONDeepNestingIsLinear guards against copying each nested
// value once per level: a 1 MiB payload nested maxJSONDepth deep would then
// move gigabytes.
//
// Not parallel: the heap counters are the process's.
func TestCanonicalJSONDeepNestingIsLinear(t *testing.T) {
	d := maxJSONDepth
	in := strings.Repeat(`{"a":`, d) + `"` + strings.Repeat("x", 1<<20) + `"` + strings.Repeat("}", d)
	var out []byte
	var err error
	// Bytes allocated, not time taken: a copy per level would allocate
	// about d times the input (gigabytes); linear work stays a small
	// multiple of it, on a loaded machine as on an idle one.
	alloc := allocatedBy(func() { out, err = CanonicalJSON([]byte(in)) })
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Fatal("output differs from the already canonical input")
	}
	t.Logf("allocated %d bytes for %d", alloc, len(in))
	if limit := uint64(16 * len(in)); alloc > limit {
		t.Fatalf("canonicalizing %d bytes nested %d deep allocated %d bytes (limit %d)", len(in), d, alloc, limit)
	}
}

// allocatedBy is how many bytes f allocated on the heap.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestCanonicalJSONDoesNotModifyInput(t *testing.T) {
	t.Parallel()
	in := []byte(`{ "b" : 1 , "a" : "\u00e9" }`)
	orig := bytes.Clone(in)
	if _, err := CanonicalJSON(in); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, orig) {
		t.Fatalf("input changed: %s", in)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	// Golden values computed independently (Python hashlib over the
	// length-prefixed bytes), so a change to the framing or the canonical
	// form shows up here: fingerprints are stored and compared across
	// backends and releases.
	golden := []struct{ kind, payload, want string }{
		{"email", `{"to":"x@example.com","b":[true,null],"a":1}`, "9e883c6cdae15a37c1b36c70c7bfdb7b009e492ab37e124ec45acee6b267d7b6"},
		{"", `{}`, "9293134d2f3453708cb9b5f1264504d96eb154dee855f5d511a0a96b12393c11"},
		{"send_email", `{"z":"\u00e9","n":4.50}`, "bba321d76b829cf9332a51996477894315fdaad8b4afc74a3f06774cb86952e1"},
	}
	for _, g := range golden {
		got, err := FingerprintOf(g.kind, []byte(g.payload))
		if err != nil {
			t.Fatalf("FingerprintOf(%q, %s): %v", g.kind, g.payload, err)
		}
		if got != g.want {
			t.Errorf("FingerprintOf(%q, %s) = %s, want %s", g.kind, g.payload, got, g.want)
		}
	}

	same := []struct{ name, a, b string }{
		{"reordered keys", `{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{"whitespace", `{"a":1,"b":[1,2]}`, " {\n  \"a\" : 1,\n  \"b\" : [ 1 , 2 ]\n}\n"},
		{"nested reorder", `{"o":{"x":1,"y":{"p":true,"q":null}}}`, `{"o":{"y":{"q":null,"p":true},"x":1}}`},
		{"number spelling", `{"n":4.5,"m":100,"k":0}`, `{"k":-0,"m":1e2,"n":4.50}`},
		{"string escapes", `{"s":"é/\n"}`, `{"s":"\u00e9\/\u000a"}`},
		{"jsonb-like reorder", `{"id":7,"customer":{"name":"Ann","id":42},"items":[{"sku":"A","qty":1}]}`,
			`{"items": [{"qty": 1, "sku": "A"}], "customer": {"id": 42, "name": "Ann"}, "id": 7}`},
	}
	for _, tt := range same {
		t.Run("same/"+tt.name, func(t *testing.T) {
			t.Parallel()
			fa, err := FingerprintOf("k", []byte(tt.a))
			if err != nil {
				t.Fatal(err)
			}
			fb, err := FingerprintOf("k", []byte(tt.b))
			if err != nil {
				t.Fatal(err)
			}
			if fa != fb {
				t.Fatalf("fingerprints differ: %s vs %s", fa, fb)
			}
			if len(fa) != 64 || strings.ToLower(fa) != fa {
				t.Fatalf("fingerprint %q is not 64 lower-case hex digits", fa)
			}
		})
	}

	differ := []struct {
		name        string
		kindA, payA string
		kindB, payB string
	}{
		{"different kinds", "email", `{"a":1}`, "sms", `{"a":1}`},
		{"kind case", "email", `{"a":1}`, "Email", `{"a":1}`},
		{"empty kind", "", `{"a":1}`, "a", `{"a":1}`},
		{"different values", "k", `{"a":1}`, "k", `{"a":2}`},
		{"different types", "k", `{"a":1}`, "k", `{"a":"1"}`},
		{"array order matters", "k", `{"a":[1,2]}`, "k", `{"a":[2,1]}`},
		{"key case", "k", `{"a":1}`, "k", `{"A":1}`},
		// Without the length prefix these would hash the same bytes.
		{"kind/payload boundary", "k{", `{}`, "k", `{"{":{}}`},
	}
	for _, tt := range differ {
		t.Run("differ/"+tt.name, func(t *testing.T) {
			t.Parallel()
			fa, err := FingerprintOf(tt.kindA, []byte(tt.payA))
			if err != nil {
				t.Fatal(err)
			}
			fb, err := FingerprintOf(tt.kindB, []byte(tt.payB))
			if err != nil {
				t.Fatal(err)
			}
			if fa == fb {
				t.Fatalf("fingerprints equal: %s", fa)
			}
		})
	}

	for _, bad := range []string{``, `{"a":1,"a":2}`, `{"a":1e999}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{`} {
		if fp, err := FingerprintOf("k", []byte(bad)); !errors.Is(err, ErrInvalid) || fp != "" {
			t.Errorf("FingerprintOf(k, %q) = %q, %v; want \"\" and ErrInvalid", bad, fp, err)
		}
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `true`, `0`, `-0`, `""`,
		`{"b":1,"a":[1,2,{"d":4,"c":3}]}`,
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]}`,
		`{"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/"}`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`[1e21,1e20,1e-7,1e-6,5e-324,1.7976931348623157e308,-1.5e-7]`,
		`{"a":1,"a":2}`, `{"a":"\ud800"}`, `1e400`, `[1,]`, "\"\xff\"",
		" {\n\t\"k\" : [ true , false , null ] \r\n} ",
		`12345678901234567890`, `0.1`, `1e-400`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := CanonicalJSON(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			if out != nil {
				t.Fatalf("output %q returned with error %v", out, err)
			}
			return
		}
		// Everything accepted is JSON by encoding/json's measure too.
		if !json.Valid(in) {
			t.Fatalf("accepted %q, which encoding/json says is invalid", in)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("output %q of %q is not valid JSON / UTF-8", out, in)
		}
		// Idempotent.
		again, err := CanonicalJSON(out)
		if err != nil {
			t.Fatalf("canonical output %q refused: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n in  %q\n out %q\n out2 %q", in, out, again)
		}
		// The output means the same as the input.
		var vin, vout any
		if err := json.Unmarshal(in, &vin); err != nil {
			t.Fatalf("encoding/json refuses accepted input %q: %v", in, err)
		}
		if err := json.Unmarshal(out, &vout); err != nil {
			t.Fatalf("encoding/json refuses output %q: %v", out, err)
		}
		if !reflect.DeepEqual(vin, vout) {
			t.Fatalf("output decodes differently:\n in  %q => %#v\n out %q => %#v", in, vin, out, vout)
		}
		// Every number in the output is ECMAScript's spelling of itself.
		checkNumbers(t, out)
	})
}

// checkNumbers walks v's numbers and checks each is written as
// appendJCSNumber writes the double it denotes.
func checkNumbers(t *testing.T, canon []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			t.Fatalf("output number %s does not parse: %v", n, err)
		}
		if want := string(appendJCSNumber(nil, f)); string(n) != want {
			t.Fatalf("output number %s, want %s", n, want)
		}
	}
}
