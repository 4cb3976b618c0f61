package sluicetype

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPathValueOf: what a payload or meta filter's value is read as; an
// object or array only when a store could keep it as a payload, so that
// every store can compare it as a value.
func TestPathValueOf(t *testing.T) {
	deep := strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1)
	for _, c := range []struct {
		v    string
		kind PathValueKind
		text string
	}{
		{"x", PathValueText, "x"},
		{`"x"`, PathValueText, `"x"`},
		{" 2.0 ", PathValueNumber, "2.0"},
		{"-0", PathValueNumber, "-0"},
		{" null", PathValueLiteral, "null"},
		{"True", PathValueText, "True"},
		{` {"p": 1} `, PathValueObject, `{"p": 1}`},
		{`[1,"x"]`, PathValueArray, `[1,"x"]`},
		{`{"p":1,"p":1}`, PathValueText, `{"p":1,"p":1}`},   // a member named twice
		{`{"p":"\u0000"}`, PathValueText, `{"p":"\u0000"}`}, // no store keeps a NUL
		{`[1e999]`, PathValueText, `[1e999]`},               // beyond a double
		{`{"p":1`, PathValueText, `{"p":1`},
		{deep, PathValueText, deep},
	} {
		kind, text := PathValueOf(c.v)
		if kind != c.kind || text != c.text {
			t.Errorf("PathValueOf(%q) = %d, %q; want %d, %q", c.v, kind, text, c.kind, c.text)
		}
	}
}

// TestPathValueMatchesShapes: an object or array matches an equal value,
// compared as values, never by containment or by its text.
func TestPathValueMatchesShapes(t *testing.T) {
	doc := json.RawMessage(`{"o":{"q":"x","p":[1,{"r":null}]},"a":[{"x":1}],"s":"{\"p\":1}","t":true}`)
	for _, c := range []struct {
		path, value string
		want        bool
	}{
		{"o", `{"q":"x","p":[1,{"r":null}]}`, true},
		{"o", `{"p":[1.0,{"r":null}],"q":"\u0078"}`, true},
		{"o", `{"p":[{"r":null},1],"q":"x"}`, false},
		{"o", `{"q":"x"}`, false},
		{"o", `{"q":"x","p":[1,{"r":null}],"z":0}`, false},
		{"o.p", ` [ 1 , { "r" : null } ] `, true},
		{"o.p", `[1]`, false},
		{"a.0", `{"x":1}`, false},
		{"a.0.x", `1`, false},
		{"s", `{"p":1}`, true}, // a string by its contents
		{"s", `{ "p":1}`, false},
		{"t", ` true `, true},
		{"t", `"true"`, false},
	} {
		if got := PathValueMatches(doc, PathMatch{Path: c.path, Value: c.value}); got != c.want {
			t.Errorf("PathValueMatches(%s:%s) = %v, want %v", c.path, c.value, got, c.want)
		}
	}
}
