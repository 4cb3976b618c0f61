// Package jsonw writes and reads JSON string literals: the one string
// writer and the one string lexer of Sluice, shared by the API's list
// encoder, the engine's RFC 8785 canonical form and the stores.
//
// It is a leaf: it imports the standard library only, so engine may use it
// (see CONTRIBUTING.md). Both directions are tested against encoding/json,
// by table and by fuzzing (FuzzAppendString, FuzzReadString).
package jsonw

import (
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string exactly as encoding/json writes
// it with HTML escaping off (json.Encoder.SetEscapeHTML(false)): " and \
// escaped, the control characters as \b, \f, \n, \r, \t or \u00XX,
// invalid UTF-8 as \ufffd, U+2028 and U+2029 as \u2028 and \u2029, every
// other character as it is.
func AppendString(dst []byte, s string) []byte {
	return appendString(dst, s, false)
}

// AppendCanonical appends s as RFC 8785 (JCS) writes a string: only ", \
// and the control characters escaped (\b, \f, \n, \r, \t, else \u00XX in
// lower-case hex), U+2028 and U+2029 as they are. s should be valid UTF-8,
// as JCS requires; an invalid byte is written as \ufffd, as AppendString
// writes it.
func AppendCanonical[T string | []byte](dst []byte, s T) []byte {
	return appendString(dst, s, true)
}

// appendString is the writer behind AppendString and AppendCanonical,
// which differ only in U+2028 and U+2029 (JavaScript line terminators that
// encoding/json escapes and RFC 8785 does not).
func appendString[T string | []byte](b []byte, s T, canonical bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s, i)
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case !canonical && (r == '\u2028' || r == '\u2029'):
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeRune decodes the rune at s[i:] whether s is a string or bytes.
func decodeRune[T string | []byte](s T, i int) (rune, int) {
	// A conversion of at most four bytes that does not escape costs no
	// allocation.
	return utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
}

// Mode says what ReadString does with what I-JSON (RFC 7493) forbids but
// encoding/json accepts: invalid UTF-8 and lone surrogates in \u escapes.
type Mode uint8

const (
	// Lenient replaces them with U+FFFD, as encoding/json does.
	Lenient Mode = iota
	// Strict refuses them, as RFC 8785 requires.
	Strict
)

// SyntaxError is a string literal ReadString cannot read: Msg says why
// and Offset is where in the input.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return e.Msg }

// ReadString reads the JSON string literal whose opening quote is at
// in[pos], appends its value to dst and returns dst and the offset just
// after the closing quote. A raw control character, an unknown escape and
// an unterminated string are refused in either mode; mode decides about
// invalid UTF-8 and lone surrogates. Errors are *SyntaxError.
func ReadString[T string | []byte](dst []byte, in T, pos int, mode Mode) ([]byte, int, error) {
	if pos >= len(in) || in[pos] != '"' {
		return dst, pos, &SyntaxError{pos, "not a string"}
	}
	pos++
	// Fast path: no escapes, and valid UTF-8.
	for i := pos; i < len(in); i++ {
		c := in[i]
		if c == '"' {
			if bad := invalidAt(in, pos, i); bad >= 0 {
				if mode == Strict {
					return dst, bad, &SyntaxError{bad, "invalid UTF-8 in a string"}
				}
				break
			}
			return append(dst, in[pos:i]...), i + 1, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	b := dst
	for {
		if pos >= len(in) {
			return dst, pos, &SyntaxError{pos, "unterminated string"}
		}
		c := in[pos]
		switch {
		case c == '"':
			return b, pos + 1, nil
		case c < 0x20:
			return dst, pos, &SyntaxError{pos, "control character 0x" + string(hexDigits[c>>4]) + string(hexDigits[c&0xf]) + " in a string"}
		case c >= utf8.RuneSelf:
			r, size := decodeRune(in, pos)
			if r == utf8.RuneError && size == 1 {
				if mode == Strict {
					return dst, pos, &SyntaxError{pos, "invalid UTF-8 in a string"}
				}
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, in[pos:pos+size]...)
			}
			pos += size
			continue
		case c != '\\':
			b = append(b, c)
			pos++
			continue
		}
		// An escape.
		if pos+1 >= len(in) {
			return dst, pos, &SyntaxError{pos, "unterminated escape"}
		}
		e := in[pos+1]
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, err := hex4(in, pos+2)
			if err != nil {
				return dst, err.Offset, err
			}
			pos += 6
			if utf16.IsSurrogate(r) {
				lo := rune(-1)
				if pos+1 < len(in) && in[pos] == '\\' && in[pos+1] == 'u' {
					if x, err := hex4(in, pos+2); err == nil {
						lo = x
					} else if mode == Strict {
						return dst, err.Offset, err
					}
				}
				dec := utf16.DecodeRune(r, lo)
				switch {
				case dec != utf8.RuneError:
					r = dec
					pos += 6
				case mode == Lenient:
					// A lone surrogate: U+FFFD, and the next escape
					// stands alone.
					r = utf8.RuneError
				case r >= 0xdc00:
					return dst, pos, &SyntaxError{pos, "lone low surrogate \\u" + hex(r)}
				case lo < 0:
					return dst, pos, &SyntaxError{pos, "lone high surrogate \\u" + hex(r)}
				default:
					return dst, pos, &SyntaxError{pos, "high surrogate \\u" + hex(r) + " followed by \\u" + hex(lo)}
				}
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			return dst, pos, &SyntaxError{pos, "invalid escape \\" + string(rune(e))}
		}
		pos += 2
	}
}

// invalidAt is the offset of the first invalid UTF-8 byte in in[from:to],
// or -1.
func invalidAt[T string | []byte](in T, from, to int) int {
	for i := from; i < to; {
		if in[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := decodeRune(in[:to], i)
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// hex4 reads the four hex digits of a \u escape at in[pos:].
func hex4[T string | []byte](in T, pos int) (rune, *SyntaxError) {
	if pos+4 > len(in) {
		return 0, &SyntaxError{pos, "short \\u escape"}
	}
	var r rune
	for i := pos; i < pos+4; i++ {
		c := in[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, &SyntaxError{pos, "invalid \\u escape"}
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}

func hex(r rune) string {
	return string([]byte{hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf]})
}
