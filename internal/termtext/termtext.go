// Package termtext is the one policy for text that came from a job —
// payload, error, trace, metadata, queue and kind names, ids — on its
// way to a terminal, for the console and the command line alike. Such
// text can hold what a terminal acts on rather than draws: a clear
// screen, an OSC 52 write to the clipboard, a carriage return that lets
// the rest of a line overwrite its start, a bidi override or a
// zero-width space that reorders or hides what is shown. Every such
// character is written out as text (ESC is shown as the four characters
// \x1b or the six \u001b), never sent.
//
// Which characters are escaped is decided once, by escaped; how they are
// spelt depends on where the text goes: the console's Line and Lines
// write \x1b, \n, \u202e; the command line's Text and Writer keep the
// line breaks and tabs its own tables and lines are made of and spell
// the rest \u001b, JSON's own escape, so JSON passed through stays valid.
package termtext

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// escaped reports the runes never written as they are: C0 controls
// (newline, tab and carriage return among them: the callers that keep
// line breaks or tabs handle those first), DEL, C1 controls (CSI 0x9b,
// OSC 0x9d... act like ESC sequences on some terminals), format
// characters that reorder or hide text (Cf: bidi embeddings, overrides,
// isolates and marks, zero-width spaces, the BOM), line and paragraph
// separators, and private-use characters. The zero-width joiner stays:
// emoji sequences use it.
func escaped(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r < 0xa0 || r == 0x200d:
		return false
	}
	return r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r)
}

// Plain reports whether s is printable ASCII only: the common case,
// which every function here returns as it is, without allocating.
func Plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// Line makes s safe to draw on one line: newlines, tabs and carriage
// returns are shown as \n, \t and \r, every other escaped rune as \xNN
// (C0 and DEL) or \uXXXX, and each byte of invalid UTF-8 as U+FFFD.
func Line(s string) string {
	if Plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	lineTo(&b, s, false)
	return b.String()
}

// Lines makes multi-line text safe to draw: one entry per line (CRLF
// and LF end a line), tabs expanded to spaces, everything else as Line.
func Lines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		if Plain(p) {
			continue
		}
		var b strings.Builder
		b.Grow(len(p) + 8)
		lineTo(&b, p, true)
		parts[i] = b.String()
	}
	return parts
}

func lineTo(b *strings.Builder, s string, expandTabs bool) {
	col := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			b.WriteRune(unicode.ReplacementChar)
			i++
			col++
			continue
		}
		i += n
		switch {
		case r == '\t' && expandTabs:
			pad := 4 - col%4
			b.WriteString("    "[:pad])
			col += pad
			continue
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			writeHex(b, uint32(r), 2)
		case escaped(r):
			writeU(b, r)
		default:
			b.WriteRune(r)
			col++
			continue
		}
		col += 4
	}
}

// Text makes text for the command line's output safe: newlines and tabs
// (its tables and lines) are kept, every other escaped rune is written
// \uXXXX (\r too: a carriage return would let the rest of a line
// overwrite its start) and each byte of invalid UTF-8 \xNN.
func Text(s string) string {
	if !needsText(s) {
		return s
	}
	var b strings.Builder
	textTo(&b, s)
	return b.String()
}

func textEscaped(r rune) bool { return r != '\n' && r != '\t' && escaped(r) }

func needsText(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || textEscaped(r) {
			return true
		}
	}
	return false
}

func textTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			writeHex(b, uint32(s[i]), 2)
		case textEscaped(r):
			writeU(b, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// writeU writes r as \uXXXX, or \UXXXXXXXX past the BMP.
func writeU(b *strings.Builder, r rune) {
	if r > 0xffff {
		b.WriteString(`\U`)
		writeHex(b, uint32(r), 8)
		return
	}
	b.WriteString(`\u`)
	writeHex(b, uint32(r), 4)
}

func writeHex(b *strings.Builder, v uint32, digits int) {
	h := strconv.FormatUint(uint64(v), 16)
	for i := len(h); i < digits; i++ {
		b.WriteByte('0')
	}
	b.WriteString(h)
}

// Writer wraps w so that everything written to it goes out as Text. A
// UTF-8 sequence cut between two writes is held until the next one
// completes it. A command's own control output (a progress line redrawn
// with \r) goes to Raw(w) instead.
func Writer(w io.Writer) io.Writer {
	if _, ok := w.(*writer); ok {
		return w
	}
	return &writer{w: w}
}

// Raw returns the writer a Writer wraps, or w itself, for output the
// command makes itself and that holds no job data.
func Raw(w io.Writer) io.Writer {
	if tw, ok := w.(*writer); ok {
		return tw.w
	}
	return w
}

type writer struct {
	w    io.Writer
	tail []byte // the start of a sequence the last write cut
}

func (t *writer) Write(p []byte) (int, error) {
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
	if !needsText(s) {
		if _, err := io.WriteString(t.w, s); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	var b strings.Builder
	textTo(&b, s)
	if _, err := io.WriteString(t.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
