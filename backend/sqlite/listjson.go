package sqlite

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/jsonw"
	"github.com/sluicehq/sluice/sluicetype"
)

// The errors and tags columns hold JSON this package wrote with
// json.Marshal. Every listed row decodes them, and encoding/json's
// reflection was a fifth of a list page's CPU, so the shapes this package
// writes are read by hand here. Anything else — another key, a number
// that is not a plain integer, a value of the wrong type — is not guessed
// at: the caller falls back to encoding/json, which stays the reference
// (listjson_test.go holds the two to the same answers).

// errNotFast reports input the hand decoders leave to encoding/json.
var errNotFast = errors.New("sqlite: not in the fast JSON shape")

// decodeAttemptErrors decodes an errors column.
func decodeAttemptErrors(s string) ([]sluicetype.AttemptError, error) {
	return decodeList(s, fastAttemptErrors)
}

// decodeList decodes s with fast, or with encoding/json when fast leaves
// it.
func decodeList[T any](s string, fast func(string) ([]T, error)) ([]T, error) {
	if out, err := fast(s); err == nil {
		return out, nil
	}
	var out []T
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// lastErrorMark starts every element but the first of an errors column
// json.Marshal wrote: AttemptError's first field is attempt, and no error
// nests an object. Inside a string the quotes would be escaped, so the
// mark's last occurrence starts the last element.
const lastErrorMark = `},{"attempt":`

// decodeLastAttemptError decodes the latest error of an errors column (a
// list of at most one) without decoding the others.
func decodeLastAttemptError(s string) ([]sluicetype.AttemptError, error) {
	if i := strings.LastIndex(s, lastErrorMark); i >= 0 {
		if out, err := fastAttemptErrors("[" + s[i+2:]); err == nil && len(out) == 1 {
			return out, nil
		}
	}
	out, err := decodeAttemptErrors(s)
	if err != nil {
		return nil, err
	}
	if len(out) > 1 {
		out = []sluicetype.AttemptError{out[len(out)-1]}
	}
	return out, nil
}

// decodeTags decodes a tags column.
func decodeTags(s string) ([]string, error) { return decodeList(s, fastStrings) }

// jsonLexer reads the compact JSON json.Marshal writes: no whitespace is
// skipped, on purpose — the fast path only has to be right for that.
type jsonLexer struct {
	s string
	i int
}

func (l *jsonLexer) byte(c byte) bool {
	if l.i < len(l.s) && l.s[l.i] == c {
		l.i++
		return true
	}
	return false
}

func (l *jsonLexer) literal(w string) bool {
	if len(l.s)-l.i >= len(w) && l.s[l.i:l.i+len(w)] == w {
		l.i += len(w)
		return true
	}
	return false
}

// str reads a JSON string, unescaped as encoding/json would.
func (l *jsonLexer) str() (string, error) {
	if !l.byte('"') {
		return "", errNotFast
	}
	start := l.i
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == '"':
			v := l.s[start:l.i]
			l.i++
			return v, nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return l.strSlow(start)
		}
		l.i++
	}
	return "", errNotFast
}

// strSlow finishes a string that has escapes or non-ASCII bytes, read as
// encoding/json reads it.
func (l *jsonLexer) strSlow(start int) (string, error) {
	b, next, err := jsonw.ReadString(nil, l.s, start-1, jsonw.Lenient)
	if err != nil {
		return "", errNotFast
	}
	l.i = next
	return string(b), nil
}

// plainStr reads a JSON string that has no escapes and only ASCII.
func (l *jsonLexer) plainStr() (string, bool) {
	if !l.byte('"') {
		return "", false
	}
	start := l.i
	for l.i < len(l.s) {
		c := l.s[l.i]
		if c == '"' {
			l.i++
			return l.s[start : l.i-1], true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return "", false
		}
		l.i++
	}
	return "", false
}

// integer reads a plain integer (no fraction or exponent).
func (l *jsonLexer) integer() (int, error) {
	start := l.i
	if l.i < len(l.s) && l.s[l.i] == '-' {
		l.i++
	}
	digits := l.i
	for l.i < len(l.s) && '0' <= l.s[l.i] && l.s[l.i] <= '9' {
		l.i++
	}
	if l.i-digits > 1 && l.s[digits] == '0' {
		return 0, errNotFast // a leading zero is not JSON
	}
	if l.i < len(l.s) && (l.s[l.i] == '.' || l.s[l.i] == 'e' || l.s[l.i] == 'E') {
		return 0, errNotFast
	}
	n, err := strconv.Atoi(l.s[start:l.i])
	if err != nil {
		return 0, errNotFast
	}
	return n, nil
}

// fastStrings decodes a JSON array of strings.
func fastStrings(s string) ([]string, error) {
	return fastArray(s, (*jsonLexer).str)
}

// fastAttemptErrors decodes an array of sluicetype.AttemptError objects.
func fastAttemptErrors(s string) ([]sluicetype.AttemptError, error) {
	return fastArray(s, (*jsonLexer).attemptError)
}

// fastArray decodes s, a JSON array, with elem reading each element. An
// empty array is an empty slice, not nil, as encoding/json has it.
func fastArray[T any](s string, elem func(*jsonLexer) (T, error)) ([]T, error) {
	l := &jsonLexer{s: s}
	if !l.byte('[') {
		return nil, errNotFast
	}
	if l.byte(']') {
		return []T{}, l.end()
	}
	var out []T
	for {
		v, err := elem(l)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if l.byte(']') {
			return out, l.end()
		}
		if !l.byte(',') {
			return nil, errNotFast
		}
	}
}

func (l *jsonLexer) end() error {
	if l.i != len(l.s) {
		return errNotFast
	}
	return nil
}

func (l *jsonLexer) attemptError() (sluicetype.AttemptError, error) {
	var e sluicetype.AttemptError
	if !l.byte('{') {
		return e, errNotFast
	}
	if l.byte('}') {
		return e, nil
	}
	for {
		key, err := l.str()
		if err != nil || !l.byte(':') {
			return e, errNotFast
		}
		switch key {
		case "attempt":
			if e.Attempt, err = l.integer(); err != nil {
				return e, err
			}
		case "crash":
			switch {
			case l.literal("true"):
				e.Crash = true
			case l.literal("false"):
				e.Crash = false
			default:
				return e, errNotFast
			}
		case "at":
			// time.Time's UnmarshalJSON parses the quoted bytes as
			// they stand, escapes and all; UnmarshalText is the same
			// strict RFC 3339 parse.
			v, ok := l.plainStr()
			if !ok {
				return e, errNotFast
			}
			if err := e.At.UnmarshalText([]byte(v)); err != nil {
				return e, errNotFast
			}
		case "started":
			v, ok := l.plainStr()
			if !ok {
				return e, errNotFast
			}
			var t time.Time
			if err := t.UnmarshalText([]byte(v)); err != nil {
				return e, errNotFast
			}
			e.Started = &t
		case "worker":
			if e.Worker, err = l.str(); err != nil {
				return e, err
			}
		case "message":
			if e.Message, err = l.str(); err != nil {
				return e, err
			}
		case "trace":
			if e.Trace, err = l.str(); err != nil {
				return e, err
			}
		case "ref":
			if e.Ref, err = l.str(); err != nil {
				return e, err
			}
		default:
			return e, errNotFast
		}
		if l.byte('}') {
			return e, nil
		}
		if !l.byte(',') {
			return e, errNotFast
		}
	}
}
