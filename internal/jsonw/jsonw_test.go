package jsonw

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// stdString is s as encoding/json writes it with HTML escaping off.
func stdString(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

var samples = []string{
	"", "plain", `quote " and backslash \`, "\b\f\n\r\t", "\x00\x01\x07\x0b\x0e\x1f\x7f",
	"<a href='x'>&amp;</a>", "é€😀\ufb33", "a\u2028b\u2029c", "bad \xff byte", "\xed\xa0\x80 surrogate",
	"trunc \xe2\x82", "\xc0\xaf overlong", strings.Repeat("x", 100) + "\n",
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range samples {
		if got, want := string(AppendString(nil, s)), stdString(t, s); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	// It appends.
	if got := string(AppendString([]byte("x:"), "y")); got != `x:"y"` {
		t.Errorf("AppendString appends: %s", got)
	}
}

func TestAppendCanonical(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x1f\x7f", "\"\\u0000\\u001f\x7f\""},
		{`"\/`, `"\"\\/"`},
		{"a\u2028b\u2029c", "\"a\u2028b\u2029c\""},
		{"<>&é😀", `"<>&é😀"`},
	}
	for _, c := range cases {
		if got := string(AppendCanonical(nil, c.in)); got != c.want {
			t.Errorf("AppendCanonical(%q) = %s, want %s", c.in, got, c.want)
		}
		if got := string(AppendCanonical(nil, []byte(c.in))); got != c.want {
			t.Errorf("AppendCanonical([]byte %q) = %s, want %s", c.in, got, c.want)
		}
	}
	// Apart from U+2028 and U+2029 it is encoding/json's form.
	for _, s := range samples {
		want := strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(stdString(t, s))
		if got := string(AppendCanonical(nil, s)); got != want {
			t.Errorf("AppendCanonical(%q) = %s, want %s", s, got, want)
		}
	}
}

var literals = []string{
	`""`, `"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u0041\u00e9\u20ac"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`,
	`"\ud800"`, `"\ud800abc"`, `"\ud800\u0041"`, `"\ud800\ud800"`, `"\ud800\n"`, `"\udc00"`, `"\udfff\udc00"`,
	"\"bad \xff\"", "\"\xed\xa0\x80\"", `"\x"`, `"\u12"`, `"\u12G4"`, `"unterminated`, `"esc\`,
	"\"raw\ncontrol\"", "\"é😀\"", `"x"trailing`,
}

// ReadString in Lenient mode reads what encoding/json reads, as it reads
// it, and refuses what it refuses.
func TestReadStringMatchesEncodingJSON(t *testing.T) {
	for _, lit := range literals {
		checkLenient(t, lit)
	}
}

func checkLenient(t *testing.T, lit string) {
	t.Helper()
	got, next, err := ReadString(nil, lit, 0, Lenient)
	if lit == "" || lit[0] != '"' {
		if err == nil {
			t.Errorf("ReadString(%q) = %q, want an error: no opening quote", lit, got)
		}
		return
	}
	// The literal ReadString read is all encoding/json gets to see.
	end := len(lit)
	if err == nil {
		end = next
	}
	var want string
	stdErr := json.Unmarshal([]byte(lit[:end]), &want)
	switch {
	case err == nil && stdErr != nil:
		t.Errorf("ReadString(%q) = %q; encoding/json refuses it: %v", lit, got, stdErr)
	case err != nil && stdErr == nil:
		t.Errorf("ReadString(%q): %v; encoding/json reads %q", lit, err, want)
	case err == nil && string(got) != want:
		t.Errorf("ReadString(%q) = %q, encoding/json reads %q", lit, got, want)
	}
	if err != nil {
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(lit) {
			t.Errorf("ReadString(%q): error %#v is not a *SyntaxError with an offset in the input", lit, err)
		}
	}
}

// Strict mode reads what Lenient reads, except invalid UTF-8 and lone
// surrogates, which it refuses.
func TestReadStringStrict(t *testing.T) {
	refused := map[string]bool{
		`"\ud800"`: true, `"\ud800abc"`: true, `"\ud800\u0041"`: true, `"\ud800\ud800"`: true,
		`"\ud800\n"`: true, `"\udc00"`: true, `"\udfff\udc00"`: true, "\"bad \xff\"": true, "\"\xed\xa0\x80\"": true,
	}
	for _, lit := range literals {
		lax, laxNext, laxErr := ReadString(nil, lit, 0, Lenient)
		strict, next, err := ReadString(nil, []byte(lit), 0, Strict)
		switch {
		case refused[lit]:
			if err == nil {
				t.Errorf("Strict ReadString(%q) = %q, want an error", lit, strict)
			}
		case (err == nil) != (laxErr == nil):
			t.Errorf("Strict ReadString(%q): %v; Lenient: %v", lit, err, laxErr)
		case err == nil && (string(strict) != string(lax) || next != laxNext):
			t.Errorf("Strict ReadString(%q) = %q, %d; Lenient %q, %d", lit, strict, next, lax, laxNext)
		}
	}
	if _, next, err := ReadString([]byte("k:"), `{"ab"}`, 1, Strict); err != nil || next != 5 {
		t.Errorf("ReadString from offset 1: next %d, %v; want 5", next, err)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		if string(got) != stdString(t, s) {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, got, stdString(t, s))
		}
		canon := AppendCanonical(nil, s)
		// Whatever it writes reads back, in both modes when s is valid.
		back, next, err := ReadString(nil, canon, 0, Lenient)
		if err != nil || next != len(canon) {
			t.Fatalf("ReadString(AppendCanonical(%q) = %s): %d, %v", s, canon, next, err)
		}
		if utf8.ValidString(s) {
			if string(back) != s {
				t.Fatalf("round trip of %q through %s gave %q", s, canon, back)
			}
			if strict, _, err := ReadString(nil, got, 0, Strict); err != nil || string(strict) != s {
				t.Fatalf("Strict ReadString(%s) = %q, %v; want %q", got, strict, err, s)
			}
		}
	})
}

func FuzzReadString(f *testing.F) {
	for _, lit := range literals {
		f.Add(lit)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		checkLenient(t, lit)
		strict, _, err := ReadString(nil, lit, 0, Strict)
		if err == nil {
			lax, _, laxErr := ReadString(nil, lit, 0, Lenient)
			if laxErr != nil || !bytes.Equal(strict, lax) || !utf8.Valid(strict) {
				t.Fatalf("Strict ReadString(%q) = %q; Lenient %q, %v", lit, strict, lax, laxErr)
			}
		}
	})
}

// Every byte alone and between others, and random strings of the
// characters that need care, as encoding/json writes them.
func TestAppendStringEveryByte(t *testing.T) {
	want := func(s string) []byte {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	check := func(s string) {
		t.Helper()
		if got, w := AppendString(nil, s), want(s); !bytes.Equal(got, w) {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, w)
		}
	}
	check("")
	for c := range 256 {
		check(string([]byte{byte(c)}))
		check("a" + string([]byte{byte(c)}) + "é")
	}
	for _, s := range []string{"\u2028", "x\u2029y", "\ufffd", "\xe2\x80", "\xf0\x9f\x98", "😀<&>", "tab\tnew\nline\r\"q\"\\", "\x7f\x00"} {
		check(s)
	}
	r := rand.New(rand.NewPCG(20261129, 3))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "\n", "\x01", "\x1f", "\x7f", "<", "&", "é", "€", "😀", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x82"}
	for range 5000 {
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		check(sb.String())
	}
}
