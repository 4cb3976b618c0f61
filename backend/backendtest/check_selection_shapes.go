package backendtest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// testSelectionPayloadShapes holds a payload or meta condition whose value
// is a JSON object or array to one meaning on every store, a table of
// stored shapes × filter values: the value at the path matches when it is
// the same JSON value (members in any order, insignificant white space
// ignored, strings by their contents, numbers by value, arrays in order),
// never by containment; a path through an array matches nothing; a value
// that is not I-JSON (a member named twice) is no object, and matches only
// a string of that text. The reference (engine.Filter.Matches) is held to
// the same table.
func testSelectionPayloadShapes(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	docs := []struct{ id, payload, meta string }{
		{"obj", `{"o":{"q":"x","p":1}}`, `{}`},
		{"nest", `{"o":{"p":{"r":[1,2]},"q":null}}`, `{}`},
		{"arr", `{"o":[1,"x",{"p":1}]}`, `{}`},
		{"arrx", `{"o":["x"]}`, `{}`},
		{"arr1", `{"o":[1]}`, `{}`},
		{"emptyo", `{"o":{}}`, `{}`},
		{"emptya", `{"o":[]}`, `{}`},
		{"num", `{"o":{"p":2.0}}`, `{}`},
		{"str", `{"o":"{\"p\":1,\"q\":\"x\"}"}`, `{}`},
		{"thru", `{"a":[{"x":1}],"o":0}`, `{}`},
		{"esc", `{"o":{"\u0041":"\u00e9"}}`, `{}`},
		{"meta", `{"o":null}`, `{"m":{"k":[true,{"z":"é"}]}}`},
	}
	var ps []engine.EnqueueParams
	for _, d := range docs {
		ps = append(ps, engine.EnqueueParams{ID: d.id, Queue: "later", Kind: "ok", Delay: time.Hour,
			Payload: json.RawMessage(d.payload), Metadata: json.RawMessage(d.meta)})
	}
	res, err := f.e.EnqueueMany(f.ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res {
		if x.Err != nil {
			t.Fatal(x.Err)
		}
	}
	jobs := map[string]*engine.Job{}
	for _, d := range docs {
		jobs[d.id] = getJob(t, f.s, d.id)
	}
	cases := []struct {
		path, value string
		meta        bool
		want        []string
	}{
		{path: "o", value: `{"q":"x","p":1}`, want: []string{"obj"}},
		{path: "o", value: `{"p":1,"q":"x"}`, want: []string{"obj", "str"}},
		{path: "o", value: ` { "p" : 1 ,  "q" : "x" } `, want: []string{"obj"}},
		{path: "o", value: `{"p":1.0,"q":"x"}`, want: []string{"obj"}},
		{path: "o", value: `{"p":1}`, want: nil},               // a part is not the whole
		{path: "o", value: `{"p":1,"q":"x","r":2}`, want: nil}, // nor is more
		{path: "o", value: `{"p":"1","q":"x"}`, want: nil},     // a string is no number
		{path: "o", value: `{"p":1,"p":1,"q":"x"}`, want: nil}, // not I-JSON: text only
		{path: "o", value: `{"p":{"r":[1,2]},"q":null}`, want: []string{"nest"}},
		{path: "o", value: `{"q":null,"p":{"r":[1.0,2e0]}}`, want: []string{"nest"}},
		{path: "o", value: `{"p":{"r":[2,1]},"q":null}`, want: nil},
		{path: "o", value: `[1,"x",{"p":1}]`, want: []string{"arr"}},
		{path: "o", value: `[1, "x", {"p": 1.00}]`, want: []string{"arr"}},
		{path: "o", value: `["x",1,{"p":1}]`, want: nil}, // arrays are in order
		{path: "o", value: `[1,"x"]`, want: nil},
		{path: "o", value: `["x"]`, want: []string{"arrx"}},
		{path: "o", value: `x`, want: nil}, // an array holding x is not x
		{path: "o", value: `1`, want: nil},
		{path: "o", value: `[1]`, want: []string{"arr1"}},
		{path: "o", value: `{}`, want: []string{"emptyo"}},
		{path: "o", value: `[]`, want: []string{"emptya"}},
		{path: "o", value: `{"p":2}`, want: []string{"num"}},
		{path: "o", value: `{"A":"é"}`, want: []string{"esc"}},
		{path: "o", value: `{"\u0041":"\u00e9"}`, want: []string{"esc"}},
		{path: "o", value: `null`, want: []string{"meta"}},
		{path: "a", value: `[{"x":1}]`, want: []string{"thru"}},
		{path: "a.0", value: `{"x":1}`, want: nil}, // no path through an array
		{path: "a.0.x", value: `1`, want: nil},
		{path: "m", meta: true, value: `{"k":[true,{"z":"\u00e9"}]}`, want: []string{"meta"}},
		{path: "m.k", meta: true, value: `[true,{"z":"é"}]`, want: []string{"meta"}},
		{path: "m.k", meta: true, value: `[true]`, want: nil},
	}
	for _, c := range cases {
		var sel engine.Filter
		what := "payload."
		if c.meta {
			what = "meta."
			sel.Meta = []engine.PathMatch{{Path: c.path, Value: c.value}}
		} else {
			sel.Payload = []engine.PathMatch{{Path: c.path, Value: c.value}}
		}
		term := what + c.path + ":" + c.value
		want := sorted(c.want)
		var ref []string
		for id, j := range jobs {
			if sel.Matches(j) {
				ref = append(ref, id)
			}
		}
		if ref = sorted(ref); !slices.Equal(ref, want) {
			t.Errorf("%s: the reference matches %v, want %v", term, ref, want)
		}
		if got := sorted(jobIDs(f.listAll(t, sel, 50))); !slices.Equal(got, want) {
			t.Errorf("%s: ListJobs matches %v, want %v", term, got, want)
		}
		dry, err := f.c.Bulk(f.ctx, engine.BulkParams{Action: engine.ActionDelete, Selector: sel, DryRun: true})
		if err != nil {
			t.Fatalf("%s: dry run: %v", term, err)
		}
		if dry.Matched != int64(len(want)) {
			t.Errorf("%s: dry run of delete matched %d, want %d (%s)", term, dry.Matched, len(want), strings.Join(want, ","))
		}
	}
}
