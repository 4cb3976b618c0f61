package sluicetype

import (
	"bytes"
	"encoding/json"
	"math/big"
	"slices"
	"strings"
)

// Matches is the reference for what a selector means: whether job j meets
// every condition of f. Every store answers a list, a count, a dry run and
// an operation's batches as if it applied Matches to each job (the
// Selection checks of backendtest compare them at random). j is a job as
// JobGetByID returns it: its last error is its latest error entry's
// message, and its error pattern NormalizeError of that. A superseded job
// is matched like any other; bulk selections leave it out unless
// f.IncludeSuperseded (see JobCountMatchingParams.ExcludeSuperseded).
//
// The conditions: list fields (states, queues, kinds, ids) match any of
// their values and tags any of the job's tags; fingerprint, unique key
// and error pattern are equal; error is a case-sensitive substring of the last
// error; times are strict (created>T: created after T), and a finalized
// bound holds only for a finalized job. A payload or meta path matches
// the value found there, as PathValueMatches states. expires<D matches
// through the cuts the engine resolved it into (Filter.Expiring): a job
// one of them holds (ExpiryCut.Holds).
func (f Filter) Matches(j *Job) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, j.State) ||
		len(f.Queues) > 0 && !slices.Contains(f.Queues, j.Queue) ||
		len(f.Kinds) > 0 && !slices.Contains(f.Kinds, j.Kind) ||
		len(f.IDs) > 0 && !slices.Contains(f.IDs, j.ID) ||
		f.Fingerprint != "" && j.Fingerprint != f.Fingerprint ||
		f.UniqueKey != "" && j.UniqueKey != f.UniqueKey {
		return false
	}
	if len(f.Tags) > 0 && !slices.ContainsFunc(f.Tags, func(t string) bool { return slices.Contains(j.Tags, t) }) {
		return false
	}
	last := ""
	if n := len(j.Errors); n > 0 {
		last = j.Errors[n-1].Message
	}
	if f.Error != "" && !strings.Contains(last, f.Error) {
		return false
	}
	if f.ErrorPattern != "" && (last == "" || NormalizeError(last) != f.ErrorPattern) {
		return false
	}
	for _, m := range f.Payload {
		if !PathValueMatches(j.Payload, m) {
			return false
		}
	}
	for _, m := range f.Meta {
		if !PathValueMatches(j.Metadata, m) {
			return false
		}
	}
	if f.ExpiresWithin != nil && !slices.ContainsFunc(f.Expiring, func(c ExpiryCut) bool { return c.Holds(j) }) {
		return false
	}
	switch {
	case f.CreatedAfter != nil && !j.CreatedAt.After(*f.CreatedAfter),
		f.CreatedBefore != nil && !j.CreatedAt.Before(*f.CreatedBefore),
		f.FinalizedAfter != nil && (j.FinalizedAt == nil || !j.FinalizedAt.After(*f.FinalizedAfter)),
		f.FinalizedBefore != nil && (j.FinalizedAt == nil || !j.FinalizedAt.Before(*f.FinalizedBefore)):
		return false
	}
	return true
}

// PathValueMatches compares the value at m.Path in doc with m.Value. A
// store that matches payload paths in Go calls it; the others translate
// it. The path's keys lead through objects only: a missing path, or one
// through an array or a scalar, matches nothing. The value found there
// matches
//
//   - a JSON string: when its contents are m.Value, exactly;
//   - a number: when m.Value is a JSON number of the same value (42
//     matches 42, 42.0 and 4.2e1);
//   - true, false or null: when m.Value is that word;
//   - an object or an array: when m.Value is the same JSON value, compared
//     as values, never by containment: an object's members in any order
//     (every member on both sides), an array's elements in order, strings
//     by their contents (escapes decoded), numbers by value, white space
//     ignored. {"q":"x","p":1} matches {"p":1.0, "q":"x"}, not {"p":1}.
//
// Beyond a string's contents, m.Value is read as PathValueOf says: less
// its surrounding white space, and as an object or array only when it is
// I-JSON (no member named twice) nested at most MaxJSONDepth deep, as a
// stored payload is.
func PathValueMatches(doc json.RawMessage, m PathMatch) bool {
	cur := doc
	for key := range strings.SplitSeq(m.Path, ".") {
		var obj map[string]json.RawMessage
		if len(cur) == 0 || json.Unmarshal(cur, &obj) != nil {
			return false
		}
		v, ok := obj[key]
		if !ok {
			return false
		}
		cur = v
	}
	cur = bytes.TrimSpace(cur)
	if len(cur) == 0 {
		return false
	}
	if cur[0] == '"' {
		var s string
		return json.Unmarshal(cur, &s) == nil && s == m.Value
	}
	kind, v := PathValueOf(m.Value)
	switch kind {
	case PathValueNumber:
		x, ok := JSONNumber(string(cur))
		y, _ := JSONNumber(v)
		return ok && x.Cmp(y) == 0
	case PathValueLiteral:
		return string(cur) == v
	case PathValueObject, PathValueArray:
		return jsonValueEqual(cur, []byte(v))
	}
	return false
}

// PathValueKind is what a payload or meta filter's value is read as when
// the value found at the path is not a JSON string (which matches by its
// contents whatever the kind).
type PathValueKind int

const (
	// PathValueText: only a JSON string matches.
	PathValueText PathValueKind = iota
	// PathValueNumber: a JSON number; a number of the same value matches.
	PathValueNumber
	// PathValueLiteral: true, false or null; that literal matches.
	PathValueLiteral
	// PathValueObject: a JSON object; an equal object matches.
	PathValueObject
	// PathValueArray: a JSON array; an equal array matches.
	PathValueArray
)

// PathValueOf reads v, a payload or meta filter's value, as
// PathValueMatches does, and returns its kind and the text a store
// compares with: v without its surrounding white space. An object or
// array is one only when a store could keep it as a payload: I-JSON (no
// member named twice, no NUL, no number beyond a double's range) and at
// most MaxJSONDepth deep; any other text is PathValueText.
func PathValueOf(v string) (PathValueKind, string) {
	t := strings.TrimSpace(v)
	if _, ok := JSONNumber(t); ok {
		return PathValueNumber, t
	}
	switch t {
	case "true", "false", "null":
		return PathValueLiteral, t
	}
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return PathValueText, t
	}
	b := []byte(t)
	if JSONDepth(b) > MaxJSONDepth || jsonHoldsNUL(b) {
		return PathValueText, t
	}
	if _, err := CanonicalJSON(b); err != nil {
		return PathValueText, t
	}
	if t[0] == '{' {
		return PathValueObject, t
	}
	return PathValueArray, t
}

// jsonValueEqual reports whether the JSON texts a and b hold the same
// value, as PathValueMatches compares objects and arrays.
func jsonValueEqual(a, b []byte) bool {
	x, err := decodeJSONValue(a)
	if err != nil {
		return false
	}
	y, err := decodeJSONValue(b)
	if err != nil {
		return false
	}
	return jsonEqualValues(x, y)
}

func decodeJSONValue(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func jsonEqualValues(x, y any) bool {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqualValues(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		return ok && slices.EqualFunc(x, y, jsonEqualValues)
	case json.Number:
		y, ok := y.(json.Number)
		if !ok {
			return false
		}
		a, ok1 := JSONNumber(string(x))
		b, ok2 := JSONNumber(string(y))
		return ok1 && ok2 && a.Cmp(b) == 0
	default: // string, bool, nil
		return x == y
	}
}

// JSONNumber parses s as one JSON number, exactly: a payload filter's
// value that is one matches a number of the same value, however written.
func JSONNumber(s string) (*big.Float, bool) {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || !json.Valid([]byte(s)) {
		return nil, false
	}
	f, _, err := big.ParseFloat(s, 10, 256, big.ToNearestEven)
	return f, err == nil
}
