package sluicetype

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// refDepth is the nesting of valid JSON b as encoding/json's tokenizer
// reads it.
func refDepth(t *testing.T, b []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return deepest
		}
		if err != nil {
			t.Fatalf("valid JSON %q: %v", b, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// FuzzJSONDepth holds the nesting limit's scanner to the decoder's
// reading of every valid value, and the engine's JSON entry points
// (ValidatePayload, ValidateJSON, CheckStorableJSON) to refusing exactly
// what nests past MaxJSONDepth.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `1`, `"{[{["`, `{"a":"\"}"}`, `{"a":[{"b":[]}]}`, `"\\\\"`,
		strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth),
		`{"a":` + strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			JSONDepth(b) // no panic on anything
			return
		}
		got, want := JSONDepth(b), refDepth(t, b)
		if got != want {
			t.Fatalf("JSONDepth(%q) = %d, decoder reads %d", b, got, want)
		}
		_, err := ValidateJSON(b)
		if deep := want > MaxJSONDepth; deep != (err != nil) {
			t.Fatalf("ValidateJSON(%q) at depth %d: %v", b, want, err)
		}
		if err := CheckStorableJSON("value", b); want > MaxJSONDepth && !errors.Is(err, ErrInvalid) {
			t.Fatalf("CheckStorableJSON(%q) at depth %d: %v", b, want, err)
		}
		if clean, err := ValidatePayload(b, 1<<20); err == nil && JSONDepth(clean) > MaxJSONDepth {
			t.Fatalf("ValidatePayload took %q at depth %d", b, JSONDepth(clean))
		}
	})
}
