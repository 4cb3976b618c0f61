package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain ascii unchanged", "dial tcp 10.0.0.1:5432: connection refused", "dial tcp 10.0.0.1:5432: connection refused"},
		{"empty", "", ""},
		{"unicode kept", "Zürich 東京 ✓", "Zürich 東京 ✓"},
		{"emoji with joiner kept", "👩‍💻", "👩‍💻"},
		{"osc 52 clipboard write", "x\x1b]52;c;aGk=\x07y", `x\x1b]52;c;aGk=\x07y`},
		{"clear screen", "boom\x1b[2J", `boom\x1b[2J`},
		{"title set", "\x1b]0;pwned\x1b\\", `\x1b]0;pwned\x1b\`},
		{"newline and tab on one line", "a\nb\tc\r", `a\nb\tc\r`},
		{"nul and del", "a\x00b\x7f", `a\x00b\x7f`},
		{"c1 csi", "a\u009b2Jb", `a\u009b2Jb`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"zero width space", "a\u200bb", `a\u200bb`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"invalid utf8", "a\xffb\xc3", "a\uFFFDb\uFFFD"},
		{"lone continuation bytes", "\x80\x80", "\uFFFD\uFFFD"},
		{"bell", "\a", `\x07`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Line(tc.in)
			if got != tc.want {
				t.Fatalf("Line(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.ContainsAny(got, "\x1b\x07\x00\n\r\u009b") {
				t.Fatalf("Line(%q) = %q still holds a control character", tc.in, got)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("Line(%q) = %q is not valid UTF-8", tc.in, got)
			}
		})
	}
}

func TestLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"one line", "abc", []string{"abc"}},
		{"trace lines kept", "goroutine 1:\n\tmain.go:12\r\n\tx.go:3", []string{"goroutine 1:", "    main.go:12", "    x.go:3"}},
		{"escape inside a line", "ok\n\x1b[31mred", []string{"ok", `\x1b[31mred`}},
		{"tab stops", "ab\tc", []string{"ab  c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Lines(tc.in)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("Lines(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func BenchmarkLinePlain(b *testing.B) {
	s := strings.Repeat("dial tcp 10.0.0.1:5432: connection refused ", 4)
	b.ReportAllocs()
	for b.Loop() {
		_ = Line(s)
	}
}
