package sluicetype

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
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/jsonw"
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
	root, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.errorf("unexpected %s after the top-level value", p.describe())
	}
	return p.write(make([]byte, 0, len(raw)), root), nil
}

// FingerprintOf is SHA-256, in lower-case hex, over the 8-byte big-endian
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

// jcsParser is a strict RFC 8259 parser. It reads the input into a flat
// tree (scalars already in canonical form in an arena), sorts each object's
// members by moving node indices rather than bytes, and then writes the
// whole in one pass, so the work is O(n log n) however deep the nesting.
type jcsParser struct {
	in  []byte
	pos int

	arena []byte    // canonical scalar text and decoded member names
	nodes []jcsNode // every value, and every member name
	kids  []int     // children of containers: arrays' values, objects' (name, value) pairs
	stack []int     // children of the containers being read
	pairs []jcsPair // scratch for sorting one object's members
	tmp   []byte    // scratch for decoding one string value
}

type jcsKind uint8

const (
	jcsScalar jcsKind = iota // arena[a:b] is its canonical text
	jcsName                  // arena[a:b] is the decoded member name
	jcsArray                 // kids[a:b] are its values
	jcsObject                // kids[a:b] are its (name, value) pairs, sorted
)

type jcsNode struct {
	kind jcsKind
	a, b int
}

type jcsPair struct{ name, value int }

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

func (p *jcsParser) node(kind jcsKind, a, b int) int {
	p.nodes = append(p.nodes, jcsNode{kind: kind, a: a, b: b})
	return len(p.nodes) - 1
}

// scalar records arena[start:] as the canonical text of a new node.
func (p *jcsParser) scalar(start int) int {
	return p.node(jcsScalar, start, len(p.arena))
}

// value reads one value and returns its node.
func (p *jcsParser) value(depth int) (int, error) {
	if p.pos >= len(p.in) {
		return 0, p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		var err error
		if p.tmp, err = p.str(p.tmp[:0]); err != nil {
			return 0, err
		}
		start := len(p.arena)
		p.arena = jsonw.AppendCanonical(p.arena, p.tmp)
		return p.scalar(start), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	}
	return 0, p.errorf("unexpected %s", p.describe())
}

func (p *jcsParser) literal(lit string) (int, error) {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return 0, p.errorf("invalid literal, want %s", lit)
	}
	p.pos += len(lit)
	start := len(p.arena)
	p.arena = append(p.arena, lit...)
	return p.scalar(start), nil
}

// endContainer moves the children pushed since base from the stack to
// kids and returns their range there.
func (p *jcsParser) endContainer(base int) (int, int) {
	a := len(p.kids)
	p.kids = append(p.kids, p.stack[base:]...)
	p.stack = p.stack[:base]
	return a, len(p.kids)
}

func (p *jcsParser) object(depth int) (int, error) {
	if depth > maxJSONDepth {
		return 0, p.errorf("nested deeper than %d", maxJSONDepth)
	}
	p.pos++ // '{'
	base := len(p.stack)
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return p.node(jcsObject, 0, 0), nil
	}
	for {
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return 0, p.errorf("unexpected %s, want a member name", p.describe())
		}
		start := len(p.arena)
		var err error
		if p.arena, err = p.str(p.arena); err != nil {
			return 0, err
		}
		name := p.node(jcsName, start, len(p.arena))
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return 0, p.errorf("unexpected %s, want ':'", p.describe())
		}
		p.pos++
		p.skipSpace()
		val, err := p.value(depth)
		if err != nil {
			return 0, err
		}
		p.stack = append(p.stack, name, val)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return 0, p.errorf("unexpected end of input in an object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			p.skipSpace()
			continue
		}
		if p.in[p.pos] != '}' {
			return 0, p.errorf("unexpected %s, want ',' or '}'", p.describe())
		}
		break
	}
	// Sort the members by name in UTF-16 code unit order; equal names are
	// then neighbours.
	p.pairs = p.pairs[:0]
	for i := base; i < len(p.stack); i += 2 {
		p.pairs = append(p.pairs, jcsPair{p.stack[i], p.stack[i+1]})
	}
	slices.SortFunc(p.pairs, func(x, y jcsPair) int {
		return compareUTF16(p.nameOf(x.name), p.nameOf(y.name))
	})
	for i := 1; i < len(p.pairs); i++ {
		if bytes.Equal(p.nameOf(p.pairs[i-1].name), p.nameOf(p.pairs[i].name)) {
			return 0, p.errorf("duplicate member name %q in the object ending here", p.nameOf(p.pairs[i].name))
		}
	}
	for i, m := range p.pairs {
		p.stack[base+2*i], p.stack[base+2*i+1] = m.name, m.value
	}
	p.pos++ // '}'
	a, b := p.endContainer(base)
	return p.node(jcsObject, a, b), nil
}

func (p *jcsParser) nameOf(n int) []byte {
	nd := p.nodes[n]
	return p.arena[nd.a:nd.b]
}

// compareUTF16 orders two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 sorts member names, without converting them.
func compareUTF16(x, y []byte) int {
	for len(x) > 0 && len(y) > 0 {
		rx, nx := utf8.DecodeRune(x)
		ry, ny := utf8.DecodeRune(y)
		if rx != ry {
			// Code point order is UTF-16 order except between a
			// supplementary rune (a surrogate pair, first unit
			// 0xD800-0xDBFF) and a BMP rune at or above U+E000. Valid
			// UTF-8 holds no surrogates, so a BMP rune below U+D800
			// sorts first and one above sorts after.
			switch xs, ys := rx >= 0x10000, ry >= 0x10000; {
			case xs && !ys:
				if ry < 0xd800 {
					return 1
				}
				return -1
			case ys && !xs:
				if rx < 0xd800 {
					return -1
				}
				return 1
			}
			if rx < ry {
				return -1
			}
			return 1
		}
		x, y = x[nx:], y[ny:]
	}
	switch {
	case len(x) < len(y):
		return -1
	case len(x) > len(y):
		return 1
	}
	return 0
}

func (p *jcsParser) array(depth int) (int, error) {
	if depth > maxJSONDepth {
		return 0, p.errorf("nested deeper than %d", maxJSONDepth)
	}
	p.pos++ // '['
	base := len(p.stack)
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return p.node(jcsArray, 0, 0), nil
	}
	for {
		val, err := p.value(depth)
		if err != nil {
			return 0, err
		}
		p.stack = append(p.stack, val)
		p.skipSpace()
		if p.pos >= len(p.in) {
			return 0, p.errorf("unexpected end of input in an array")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			p.skipSpace()
			continue
		}
		if p.in[p.pos] != ']' {
			return 0, p.errorf("unexpected %s, want ',' or ']'", p.describe())
		}
		p.pos++
		a, b := p.endContainer(base)
		return p.node(jcsArray, a, b), nil
	}
}

// write appends node n's canonical form. Its recursion is as deep as the
// input's nesting, which the parser bounded.
func (p *jcsParser) write(out []byte, n int) []byte {
	nd := p.nodes[n]
	switch nd.kind {
	case jcsScalar:
		return append(out, p.arena[nd.a:nd.b]...)
	case jcsArray:
		out = append(out, '[')
		for i, k := range p.kids[nd.a:nd.b] {
			if i > 0 {
				out = append(out, ',')
			}
			out = p.write(out, k)
		}
		return append(out, ']')
	default: // jcsObject
		out = append(out, '{')
		for i := nd.a; i < nd.b; i += 2 {
			if i > nd.a {
				out = append(out, ',')
			}
			out = jsonw.AppendCanonical(out, p.nameOf(p.kids[i]))
			out = append(out, ':')
			out = p.write(out, p.kids[i+1])
		}
		return append(out, '}')
	}
}

// str reads a string literal and appends its value to dst. It refuses raw
// control characters, invalid UTF-8, unknown escapes and lone surrogates.
func (p *jcsParser) str(dst []byte) ([]byte, error) {
	out, next, err := jsonw.ReadString(dst, p.in, p.pos, jsonw.Strict)
	if err != nil {
		var se *jsonw.SyntaxError
		if errors.As(err, &se) {
			p.pos = se.Offset
		}
		return nil, p.errorf("%s", err)
	}
	p.pos = next
	return out, nil
}

// number reads a number with RFC 8259's grammar, parses it as an IEEE-754
// double (rounding to nearest, as JCS does) and records it as ECMAScript
// writes it.
func (p *jcsParser) number() (int, error) {
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
		return 0, p.errorf("invalid number")
	}
	plainInt := true
	if i < len(p.in) && p.in[i] == '.' {
		plainInt = false
		i++
		if digits() == 0 {
			p.pos = i
			return 0, p.errorf("invalid number: no digits after '.'")
		}
	}
	if i < len(p.in) && (p.in[i] == 'e' || p.in[i] == 'E') {
		plainInt = false
		i++
		if i < len(p.in) && (p.in[i] == '+' || p.in[i] == '-') {
			i++
		}
		if digits() == 0 {
			p.pos = i
			return 0, p.errorf("invalid number: no digits in the exponent")
		}
	}
	text := p.in[start:i]
	if plainInt && len(text) <= 16 && (len(text) <= 15 || text[0] == '-') {
		// Fast path: an integer of at most 15 digits is an exact double
		// that ECMAScript writes as it is (but -0 as 0).
		p.pos = i
		at := len(p.arena)
		if string(text) == "-0" {
			p.arena = append(p.arena, '0')
		} else {
			p.arena = append(p.arena, text...)
		}
		return p.scalar(at), nil
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) && !math.IsInf(f, 0) {
			// Underflow: rounded to zero or a subnormal, still a double.
			err = nil
		}
	}
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, p.errorf("number %s is not a finite IEEE-754 double", text)
	}
	p.pos = i
	at := len(p.arena)
	p.arena = appendJCSNumber(p.arena, f)
	return p.scalar(at), nil
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
	var buf, dbuf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	mant, exp, _ := bytes.Cut(e, []byte{'e'})
	digits := dbuf[:0]
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	x := 0
	for _, c := range exp[1:] {
		x = 10*x + int(c-'0')
	}
	if exp[0] == '-' {
		x = -x
	}
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
