package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of arrays and objects CanonicalJSON
// accepts, so a hostile payload cannot exhaust the stack.
const maxJSONDepth = 10000

// CanonicalJSON returns the RFC 8785 (JSON Canonicalization Scheme) form of
// raw: object members sorted by the UTF-16 code units of their names, no
// insignificant whitespace, strings with only the escapes JCS requires, and
// numbers as ECMAScript's Number.prototype.toString writes them.
//
// It refuses, with an error wrapping ErrInvalid, anything that is not
// I-JSON: invalid JSON or UTF-8, lone surrogates in \u escapes, duplicate
// member names, and numbers outside the finite IEEE-754 doubles.
func CanonicalJSON(raw []byte) ([]byte, error) {
	p := jcsParser{in: raw}
	p.skipSpace()
	out, err := p.value(make([]byte, 0, len(raw)), 0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.errorf("unexpected %s after the top-level value", p.describe())
	}
	return out, nil
}

// Fingerprint is SHA-256, in lower-case hex, over the 8-byte big-endian
// length of kind, kind, the 8-byte big-endian length of the canonical
// (RFC 8785) payload, and that canonical payload. It is the same on every
// backend whatever the key order or whitespace the payload was stored with.
func FingerprintOf(kind string, payload []byte) (string, error) {
	canon, err := CanonicalJSON(payload)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(kind)))
	h.Write(n[:])
	h.Write([]byte(kind))
	binary.BigEndian.PutUint64(n[:], uint64(len(canon)))
	h.Write(n[:])
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// jcsParser is a strict RFC 8259 parser that writes the canonical form as
// it reads.
type jcsParser struct {
	in  []byte
	pos int
}

func (p *jcsParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: json at offset %d: %s", ErrInvalid, p.pos, fmt.Sprintf(format, args...))
}

func (p *jcsParser) describe() string {
	if p.pos >= len(p.in) {
		return "end of input"
	}
	c := p.in[p.pos]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *jcsParser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jcsParser) value(out []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.in) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth+1)
	case c == '[':
		return p.array(out, depth+1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendJCSString(out, s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(out)
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	}
	return nil, p.errorf("unexpected %s", p.describe())
}

func (p *jcsParser) literal(out []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return nil, p.errorf("invalid literal, want %s", lit)
	}
	p.pos += len(lit)
	return append(out, lit...), nil
}

type jcsMember struct {
	name  string
	key   []uint16 // name in UTF-16 code units, the JCS sort key
	start int      // the member's canonical value in the object's scratch
	end   int
}

func (p *jcsParser) object(out []byte, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nested deeper than %d", maxJSONDepth)
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return append(out, '{', '}'), nil
	}
	var (
		members []jcsMember
		scratch []byte
		seen    = make(map[string]struct{})
	)
	for {
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.errorf("unexpected %s, want a member name", p.describe())
		}
		namePos := p.pos
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := seen[name]; dup {
			p.pos = namePos
			return nil, p.errorf("duplicate member name %q", name)
		}
		seen[name] = struct{}{}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.errorf("unexpected %s, want ':'", p.describe())
		}
		p.pos++
		p.skipSpace()
		start := len(scratch)
		scratch, err = p.value(scratch, depth)
		if err != nil {
			return nil, err
		}
		members = append(members, jcsMember{name: name, key: utf16.Encode([]rune(name)), start: start, end: len(scratch)})
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.errorf("unexpected end of input in an object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			p.skipSpace()
			continue
		}
		if p.in[p.pos] != '}' {
			return nil, p.errorf("unexpected %s, want ',' or '}'", p.describe())
		}
		p.pos++
		break
	}
	slices.SortFunc(members, func(a, b jcsMember) int { return slices.Compare(a.key, b.key) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJCSString(out, m.name)
		out = append(out, ':')
		out = append(out, scratch[m.start:m.end]...)
	}
	return append(out, '}'), nil
}

func (p *jcsParser) array(out []byte, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nested deeper than %d", maxJSONDepth)
	}
	p.pos++ // '['
	out = append(out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return append(out, ']'), nil
	}
	for first := true; ; first = false {
		if !first {
			out = append(out, ',')
		}
		var err error
		out, err = p.value(out, depth)
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return nil, p.errorf("unexpected end of input in an array")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			p.skipSpace()
			continue
		}
		if p.in[p.pos] != ']' {
			return nil, p.errorf("unexpected %s, want ',' or ']'", p.describe())
		}
		p.pos++
		return append(out, ']'), nil
	}
}

// str reads a string literal and returns its value. It refuses raw control
// characters, invalid UTF-8, unknown escapes and lone surrogates.
func (p *jcsParser) str() (string, error) {
	p.pos++ // opening quote
	// Fast path: no escapes.
	start := p.pos
	for i := p.pos; i < len(p.in); i++ {
		c := p.in[i]
		if c == '"' {
			s := p.in[start:i]
			if !utf8.Valid(s) {
				return "", p.badUTF8(start, i)
			}
			p.pos = i + 1
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	var b []byte
	for {
		if p.pos >= len(p.in) {
			return "", p.errorf("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c < 0x20:
			return "", p.errorf("control character 0x%02x in a string", c)
		case c < utf8.RuneSelf:
			if c != '\\' {
				b = append(b, c)
				p.pos++
				continue
			}
		default:
			r, size := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8 in a string")
			}
			b = append(b, p.in[p.pos:p.pos+size]...)
			p.pos += size
			continue
		}
		// An escape.
		if p.pos+1 >= len(p.in) {
			return "", p.errorf("unterminated escape")
		}
		e := p.in[p.pos+1]
		p.pos += 2
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
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 {
					return "", p.errorf("lone low surrogate \\u%04x", r)
				}
				if p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
					return "", p.errorf("lone high surrogate \\u%04x", r)
				}
				p.pos += 2
				lo, err := p.hex4()
				if err != nil {
					return "", err
				}
				if lo < 0xdc00 || lo > 0xdfff {
					return "", p.errorf("high surrogate \\u%04x followed by \\u%04x", r, lo)
				}
				r = utf16.DecodeRune(r, lo)
			}
			b = utf8.AppendRune(b, r)
		default:
			p.pos -= 2
			return "", p.errorf("invalid escape \\%c", e)
		}
	}
}

func (p *jcsParser) badUTF8(start, end int) error {
	s := p.in[start:end]
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size <= 1 {
			p.pos = start + i
			break
		}
		i += size
	}
	return p.errorf("invalid UTF-8 in a string")
}

func (p *jcsParser) hex4() (rune, error) {
	if p.pos+4 > len(p.in) {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, p.errorf("invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

// number reads a number with RFC 8259's grammar, parses it as an IEEE-754
// double (rounding to nearest, as JCS does) and writes it as ECMAScript
// would.
func (p *jcsParser) number(out []byte) ([]byte, error) {
	start := p.pos
	i := p.pos
	digits := func() int {
		n := 0
		for i < len(p.in) && p.in[i] >= '0' && p.in[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if p.in[i] == '-' {
		i++
	}
	switch {
	case i < len(p.in) && p.in[i] == '0':
		i++
	case i < len(p.in) && p.in[i] >= '1' && p.in[i] <= '9':
		digits()
	default:
		p.pos = i
		return nil, p.errorf("invalid number")
	}
	if i < len(p.in) && p.in[i] == '.' {
		i++
		if digits() == 0 {
			p.pos = i
			return nil, p.errorf("invalid number: no digits after '.'")
		}
	}
	if i < len(p.in) && (p.in[i] == 'e' || p.in[i] == 'E') {
		i++
		if i < len(p.in) && (p.in[i] == '+' || p.in[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			return nil, p.errorf("invalid number: no digits in the exponent")
		}
	}
	text := string(p.in[start:i])
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) && !math.IsInf(f, 0) {
			// Underflow: rounded to zero or a subnormal, still a double.
			err = nil
		}
	}
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, p.errorf("number %s is not a finite IEEE-754 double", text)
	}
	p.pos = i
	return appendJCSNumber(out, f), nil
}

// appendJCSNumber appends f as ECMAScript's Number.prototype.toString
// writes it (RFC 8785 section 3.2.2.3): the shortest digits that round-trip,
// plain notation for magnitudes in [1e-6, 1e21), exponent notation like
// 1e+21 or 1.5e-7 otherwise, and -0 as 0. f must be finite.
func appendJCSNumber(out []byte, f float64) []byte {
	if f == 0 {
		return append(out, '0')
	}
	if f < 0 {
		out = append(out, '-')
		f = -f
	}
	// Shortest round-trip digits d1.d2d3...e±x; value = 0.d1d2... × 10^n.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	mant, exp, _ := bytes.Cut(e, []byte{'e'})
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	x, _ := strconv.Atoi(string(exp))
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21:
		out = append(out, digits...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(out, digits[:n]...)
		out = append(out, '.')
		out = append(out, digits[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, digits...)
	default:
		out = append(out, digits[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, digits[1:]...)
		}
		out = append(out, 'e')
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, int64(n-1), 10)
	}
	return out
}

// appendJCSString appends s (valid UTF-8) as a JSON string with only the
// escapes RFC 8785 requires.
func appendJCSString(out []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c >= 0x20:
			out = append(out, c)
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return append(out, '"')
}
