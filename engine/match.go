package engine

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
// f.IncludeSuperseded (see JobCountParams.ExcludeSuperseded).
//
// The conditions: list fields (states, queues, kinds, ids) match any of
// their values and tags any of the job's tags; fingerprint and error
// pattern are equal; error is a case-sensitive substring of the last
// error; times are strict (created>T: created after T), and a finalized
// bound holds only for a finalized job. A payload or meta path matches
// the value found there: a JSON string by its contents; a JSON number,
// when the value given is one too, by its value (42 matches 42, 42.0 and
// 4.2e1); any other value by its compact JSON text. A missing path, or
// one through a value that is not an object, matches nothing.
func (f Filter) Matches(j *Job) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, j.State) ||
		len(f.Queues) > 0 && !slices.Contains(f.Queues, j.Queue) ||
		len(f.Kinds) > 0 && !slices.Contains(f.Kinds, j.Kind) ||
		len(f.IDs) > 0 && !slices.Contains(f.IDs, j.ID) ||
		f.Fingerprint != "" && j.Fingerprint != f.Fingerprint {
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
	switch {
	case f.CreatedAfter != nil && !j.CreatedAt.After(*f.CreatedAfter),
		f.CreatedBefore != nil && !j.CreatedAt.Before(*f.CreatedBefore),
		f.FinalizedAfter != nil && (j.FinalizedAt == nil || !j.FinalizedAt.After(*f.FinalizedAfter)),
		f.FinalizedBefore != nil && (j.FinalizedAt == nil || !j.FinalizedAt.Before(*f.FinalizedBefore)):
		return false
	}
	return true
}

// PathValueMatches compares the value at m.Path in doc with m.Value, as
// Filter.Matches states: a store that matches payload paths in Go calls
// it.
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
	if len(cur) > 0 && cur[0] == '"' {
		var s string
		return json.Unmarshal(cur, &s) == nil && s == m.Value
	}
	if x, ok := JSONNumber(string(cur)); ok {
		y, ok := JSONNumber(m.Value)
		return ok && x.Cmp(y) == 0
	}
	var b bytes.Buffer
	return json.Compact(&b, cur) == nil && b.String() == m.Value
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
