package tui

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Every string that came from a job — payload, error, trace, metadata,
// queue and kind names, ids — goes through Sanitize (one line) or
// SanitizeLines (text that keeps its line breaks) before it is drawn.
// Control characters and escape sequences are written out as text
// (`\x1b]52;...` is shown as those nine characters, never sent to the
// terminal), format characters that reorder or hide text (bidi overrides,
// zero-width marks) are shown as `\u202e`, and invalid UTF-8 becomes U+FFFD.

// Sanitize makes s safe to draw on one line: newlines and tabs are shown
// as \n and \t, every other control or format character escaped.
func Sanitize(s string) string {
	if isPlainASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	sanitizeTo(&b, s, false)
	return b.String()
}

// SanitizeLines makes multi-line text safe to draw: it returns one entry
// per line, tabs expanded to spaces, every other control or format
// character escaped.
func SanitizeLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		if isPlainASCII(p) {
			continue
		}
		var b strings.Builder
		b.Grow(len(p) + 8)
		sanitizeTo(&b, p, true)
		parts[i] = b.String()
	}
	return parts
}

// isPlainASCII reports whether s is printable ASCII only (the common case,
// returned as is without allocating).
func isPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

func sanitizeTo(b *strings.Builder, s string, expandTabs bool) {
	col := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			// Invalid UTF-8: one replacement character per bad byte.
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
		case r >= 0x80 && r < 0xa0:
			// C1 controls (CSI 0x9b, OSC 0x9d, ...) act like ESC sequences
			// on some terminals.
			b.WriteString(`\u`)
			writeHex(b, uint32(r), 4)
		case unsafeFormat(r):
			if r > 0xffff {
				b.WriteString(`\U`)
				writeHex(b, uint32(r), 8)
			} else {
				b.WriteString(`\u`)
				writeHex(b, uint32(r), 4)
			}
		default:
			b.WriteRune(r)
			col++
			continue
		}
		col += 4
	}
}

// unsafeFormat reports format and separator characters that can hide or
// reorder what is drawn: bidi controls, zero-width spaces, line and
// paragraph separators. The zero-width joiner stays (emoji sequences use
// it).
func unsafeFormat(r rune) bool {
	if r == 0x200d {
		return false
	}
	return unicode.Is(unicode.Cf, r) || r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Co, r)
}

func writeHex(b *strings.Builder, v uint32, digits int) {
	h := strconv.FormatUint(uint64(v), 16)
	for i := len(h); i < digits; i++ {
		b.WriteByte('0')
	}
	b.WriteString(h)
}
