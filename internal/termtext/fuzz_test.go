package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// interpretable reports the first thing in s a terminal would act on
// rather than draw: a C0 control (ESC, BEL, CR, ... and so the start of
// every CSI, OSC and DCS sequence), DEL, a C1 control (U+0080–U+009F,
// among them CSI 0x9b, DCS 0x90, OSC 0x9d, ST 0x9c), invalid UTF-8 (a
// terminal may read a lone 0x9b byte as CSI), or a character that
// reorders or hides text (bidi embeddings, overrides and isolates, the
// marks, zero-width spaces, line and paragraph separators, the BOM).
func interpretable(s string, allowTab bool) (string, bool) {
	if !utf8.ValidString(s) {
		return "invalid UTF-8", true
	}
	for _, r := range s {
		switch {
		case r == '\t' && allowTab:
		case r < 0x20 || r == 0x7f:
			return "C0 control", true
		case r >= 0x80 && r < 0xa0:
			return "C1 control", true
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return "bidi embedding, override or isolate", true
		case r == 0x200e || r == 0x200f || r == 0x061c:
			return "bidi mark", true
		case r == 0x200b || r == 0x2060 || r == 0xfeff || r == 0x2028 || r == 0x2029:
			return "zero-width or separator", true
		}
	}
	return "", false
}

// FuzzLine holds the console's side of the policy (every string from a
// job passes Line or Lines before it is drawn) to its promise: no input yields a byte
// sequence a terminal would interpret. The seeds run as an ordinary test.
func FuzzLine(f *testing.F) {
	for _, s := range []string{
		"", "plain", "tab\there\nnew line\r\n",
		"\x1b[2J\x1b[H", "\x1b]52;c;AAAA\x07", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
		"\x1bP+q544e\x1b\\", "\x9b31m", "\xc2\x9b31m", "\xc2\x9d0;title\xc2\x9c",
		"abc\u202eRTL\u202c", "\u2066iso\u2069", "\u200e\u200f\u061c", "zero\u200bwidth\ufeff",
		"sep\u2028\u2029", "emoji 👩\u200d💻", "\xff\xfe bad", "\x00nul\x7fdel", "日本語",
		"\U000e0001tag", "\ue000private", strings.Repeat("\x1b", 5),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Line(s)
		if what, bad := interpretable(out, false); bad {
			t.Fatalf("Line(%q) = %q holds a %s", s, out, what)
		}
		if Plain(s) && out != s {
			t.Fatalf("Line(%q) = %q changed printable ASCII", s, out)
		}
		for i, line := range Lines(s) {
			if what, bad := interpretable(line, false); bad {
				t.Fatalf("Lines(%q)[%d] = %q holds a %s", s, i, line, what)
			}
		}
	})
}

// FuzzText holds the command line's side of the policy to the same
// promise, newlines and tabs aside (its own tables and lines): Text, and
// Writer whatever the writes' boundaries, send nothing a terminal would
// interpret, and Writer gives what Text gives.
func FuzzText(f *testing.F) {
	for _, s := range []string{
		"", "plain", "tab\there\nnew line\r\n", "over\rwrite", "\x1b[2J", "\x1b]52;c;AAAA\x07",
		"\xc2\x9b31m", "abc\u202eRTL", "zero\u200bwidth", "emoji 👩\u200d💻", "\xff\xfe bad", "日本語",
	} {
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, s string, cut uint8) {
		out := Text(s)
		for _, line := range strings.Split(out, "\n") {
			if what, bad := interpretableText(line); bad {
				t.Fatalf("Text(%q) = %q holds a %s", s, out, what)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		var b strings.Builder
		w := Writer(&b)
		at := int(cut) % (len(s) + 1)
		for _, part := range []string{s[:at], s[at:]} {
			if _, err := w.Write([]byte(part)); err != nil {
				t.Fatal(err)
			}
		}
		if b.String() != out {
			t.Fatalf("Writer cut at %d gave %q, Text gave %q", at, b.String(), out)
		}
	})
}

// interpretableText is interpretable for the command line's output,
// where invalid UTF-8 is shown as \xNN text and tabs are kept.
func interpretableText(s string) (string, bool) {
	if !utf8.ValidString(s) {
		return "invalid UTF-8", true
	}
	return interpretable(s, true)
}
