package cliutil

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Job data (ids, error messages, payloads, selectors) reaches the
// commands' output as it was stored, and a job's error can hold terminal
// escapes (a clear screen, an OSC 52 write to the clipboard, a bidi
// override). TermSafe and TermText show such characters escaped, so that
// no job drives the operator's terminal; JSON stays valid, since they are
// only ever inside its strings and \uXXXX is JSON's own escape.

// unsafeRune reports the runes shown escaped: C0 controls but tab,
// newline and carriage return (tables, lines and progress use them),
// DEL, C1 controls, and the bidi embeddings, overrides and isolates.
func unsafeRune(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return true
	}
	return false
}

// TermText is s with every unsafe rune written \uXXXX and every byte of
// invalid UTF-8 written \xNN.
func TermText(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	writeEscaped(&b, s)
	return b.String()
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || unsafeRune(r) {
			return true
		}
	}
	return false
}

func writeEscaped(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(b, `\x%02x`, s[i])
		case unsafeRune(r):
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// TermSafe wraps w so that everything written to it goes out as
// TermText. A UTF-8 sequence cut between two writes is held until the
// next one completes it.
func TermSafe(w io.Writer) io.Writer {
	if _, ok := w.(*termSafe); ok {
		return w
	}
	return &termSafe{w: w}
}

type termSafe struct {
	w    io.Writer
	tail []byte // the start of a sequence the last write cut
}

func (t *termSafe) Write(p []byte) (int, error) {
	buf := append(t.tail, p...)
	t.tail = nil
	// Hold back a last sequence that is cut short (at most 3 bytes).
	for k := 1; k <= 3 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(buf[len(buf)-k:]) {
				t.tail = append([]byte(nil), buf[len(buf)-k:]...)
				buf = buf[:len(buf)-k]
			}
			break
		}
	}
	s := string(buf)
	if !needsEscape(s) {
		if _, err := io.WriteString(t.w, s); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	var b strings.Builder
	writeEscaped(&b, s)
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
