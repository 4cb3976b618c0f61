package sluicetype

import "fmt"

// MaxJSONDepth is the deepest nesting of objects and arrays a JSON value
// the engine keeps may have: a payload, metadata, a step result (a
// handler's or a replay's), a signal's payload. {"a":1} is 1 deep,
// {"a":[1]} 2. Every store's JSON functions must be able to read every
// row it holds (SQLite's stop at 1000 levels), so the engine refuses
// deeper values, with ErrInvalid, wherever they come in; real payloads
// rarely go past ten.
const MaxJSONDepth = 64

// JSONDepth returns the deepest nesting of objects and arrays in b, read
// as JSON text without decoding it (strings are skipped, escapes
// honoured). For text that is not JSON it returns a depth all the same;
// callers check validity on their own.
func JSONDepth(b []byte) int {
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// CheckJSONDepth refuses b deeper than MaxJSONDepth; what names the value
// in the error.
func CheckJSONDepth(what string, b []byte) error {
	if d := JSONDepth(b); d > MaxJSONDepth {
		return fmt.Errorf("%w: %s nests %d levels deep; the limit is %d", ErrInvalid, what, d, MaxJSONDepth)
	}
	return nil
}
