package termtext

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"plain é ✓\ttab\nline", "plain é ✓\ttab\nline"},
		{"overwrite\rfake line", `overwrite\u000dfake line`},
		{"zero\u200bwidth \ufeffbom \u2028sep", `zero\u200bwidth \ufeffbom \u2028sep`},
		{"private \ue000 tag \U000e0001", `private \ue000 tag \U000e0001`},
		{"clear \x1b[2J bell \a", `clear \u001b[2J bell \u0007`},
		{"osc \x1b]52;c;aGk=\x07", `osc \u001b]52;c;aGk=\u0007`},
		{"c1 \u009b31m del \x7f", `c1 \u009b31m del \u007f`},
		{"bidi \u202e \u2066", `bidi \u202e \u2066`},
		{"bad \xff\xfe", `bad \xff\xfe`},
		{"nul \x00", `nul \u0000`},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestTermSafeWriter: sequences cut between writes come out whole, and
// JSON written through it stays valid JSON with the same value.
func TestWriter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := Writer(&out)
	msg := "err \u009b2J é \x1b[31m ✓ \u202e"
	raw, err := json.Marshal(map[string]string{"m": msg})
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw { // one byte a write: every sequence is cut
		if _, err := w.Write(raw[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if bytes.ContainsAny(out.Bytes(), "\x1b\u009b\u202e") {
		t.Fatalf("raw control characters went out: %q", out.String())
	}
	var back map[string]string
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back["m"] != msg {
		t.Fatalf("JSON through TermSafe: %q: %v, value %q", out.String(), err, back["m"])
	}
}
