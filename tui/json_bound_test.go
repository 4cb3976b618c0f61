package tui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// deepPayload is the payload of the report: 9,995 nested objects, about
// 60 KB.
func deepPayload(depth int) []byte {
	return []byte(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
}

// TestPayloadLinesBounded: whatever the payload's shape, its printed
// lines cost a bounded multiple of its size, and are cut past
// maxPayloadLines with a line that says so.
func TestPayloadLinesBounded(t *testing.T) {
	t.Parallel()
	wide := []byte("[" + strings.Repeat("1,", maxPayloadLines) + "1]")
	for _, tc := range []struct {
		name string
		raw  []byte
		cut  bool
	}{
		{"9,995 nested objects", deepPayload(9995), false},
		{"more numbers than lines", wide, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := prettyJSONLines(tc.raw)
			total := 0
			for _, l := range lines {
				total += len(l) + 1
			}
			// Each line carries at most 2*maxIndentDepth spaces of indent
			// beside its share of the payload.
			if bound := len(tc.raw) + len(lines)*(2*maxIndentDepth+2); total > bound {
				t.Fatalf("%d bytes printed for a %d-byte payload (%d lines); want at most %d", total, len(tc.raw), len(lines), bound)
			}
			if len(lines) > maxPayloadLines+1 {
				t.Fatalf("%d lines, want at most %d and a note", len(lines), maxPayloadLines)
			}
			if last := lines[len(lines)-1]; strings.HasPrefix(last, "… cut at") != tc.cut {
				t.Fatalf("last line %q, cut %v", last, tc.cut)
			}
		})
	}
}

// TestIndentJSONAsIndent: within maxIndentDepth, indentJSON prints what
// json.Indent prints; deeper, the same JSON.
func TestIndentJSONAsIndent(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{}`, `[]`, `{"a":1}`, ` { "a" : [ 1 , 2 , { } , [ ] ] , "b" : "x\"}]," } `,
		`"s"`, `12.5e3`, `null`, `[{"a":{"b":[true,false,null]}}]`, `{"k\\":"v\\\\"}`,
		string(deepPayload(maxIndentDepth)), string(deepPayload(maxIndentDepth + 40)),
	} {
		got, cut := indentJSON([]byte(in), -1)
		if cut {
			t.Fatalf("%s: cut with no line limit", in)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(in), "", "  "); err != nil {
			t.Fatal(err)
		}
		if json.Compact(&bytes.Buffer{}, got) != nil || !sameJSON(t, got, want.Bytes()) {
			t.Fatalf("%s: not the same JSON:\n%s", in, got)
		}
		// json.Indent keeps trailing white space; the sheet has no use for it.
		if deep := strings.Count(in, "{") > maxIndentDepth; !deep && string(got) != strings.TrimSpace(want.String()) {
			t.Fatalf("%s:\n got %s\nwant %s", in, got, want.String())
		}
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, a); err != nil {
		return false
	}
	if err := json.Compact(&cb, b); err != nil {
		t.Fatal(err)
	}
	return ca.String() == cb.String()
}

// FuzzIndentJSON holds indentJSON to json.Indent's text, as JSON, for
// any valid input, and to the bound on its indentation.
func FuzzIndentJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":"c"}]}`, `[[[[[[]]]]]]`, `"x\"y"`, string(deepPayload(70))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		got, _ := indentJSON(raw, -1)
		var want bytes.Buffer
		if err := json.Indent(&want, raw, "", "  "); err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got, want.Bytes()) {
			t.Fatalf("indentJSON(%q) = %q, not the same JSON", raw, got)
		}
		for _, l := range strings.Split(string(got), "\n") {
			if n := len(l) - len(strings.TrimLeft(l, " ")); n > 2*maxIndentDepth {
				t.Fatalf("a line indented %d spaces: %q", n, l)
			}
		}
	})
}
