package engine_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// goldenFingerprints are fingerprints as stores hold them today. They were
// computed before the canonical string writer moved to internal/jsonw, so
// a change to the framing, the escapes or the number form fails here:
// a stored fingerprint that changed would no longer match new enqueues of
// the same content, and quarantines would be lifted by accident.
var goldenFingerprints = []struct{ name, kind, payload, want string }{
	{"empty", "", `{}`, "9293134d2f3453708cb9b5f1264504d96eb154dee855f5d511a0a96b12393c11"},
	{"key order and nesting", "email", `{"to":"x@example.com","b":[true,null],"a":{"z":1,"y":[{"b":2,"a":1}]}}`, "1bf68edd71497a66d5af562e2e546b148d616f5d646b453bfc6ba27ff9d2611f"},
	{"numbers", "n", `{"a":4.50,"b":1e21,"c":1e-7,"d":-0,"e":333333333.33333329,"f":5e-324,"g":100,"h":0.000001}`, "da492f4755b81a3c083d77c3f2ef1507b60c48d81dfac34e980df81bfbb641f6"},
	{"short escapes", "s", `{"s":"\b\f\n\r\t\"\\\/"}`, "d57e49359ec6e96df14ccbb9625a5c3b54a30a275ed2ad5f64726de314f2610e"},
	{"other controls", "s", `{"s":"\u0000\u0001\u0007\u000b\u000e\u001f\u007f"}`, "14bc727235b4cb2eff3d11ee5feb8ab6d4e613e97f60026ac655efef8b0d4989"},
	{"line and paragraph separators", "s", "{\"s\":\"a\u2028b\u2029c\"}", "7391608e6a4a830aa60b5778e75d96f31f4f908dd6dd758d8d5016e63991e6d5"},
	{"html characters", "s", `{"s":"<a href='x'>&amp;</a>"}`, "9eab4066389487b1df8c1f0e9c7b09f83f45b970d8de19f59329477bc096a705"},
	{"non-ASCII", "s", `{"s":"é€😀\ufb33","\u00e9":1,"e":2}`, "9b14d63f18eb59ca451b1139dc7699fbee0516275a84478d3781c6f6f3e5a08a"},
	{"surrogate pair escape", "s", `{"s":"\ud83d\ude00"}`, "f0c372f2e0e45a8c213f97603bb322ae8e37a81d35cfb8303d553e1c7d307b6f"},
	{"keys sorted by UTF-16", "k", `{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`, "bf684231046bcf01ecfbc49aa092e0b3c3624100374c822b39d4f4cf8a0fbe44"},
	{"escaped key", "k", `{"a\nb":"\u0041","a\"b":[],"":null}`, "df392f5195734553076dc65e5f176ee102c599609985e797c83e81217d5e7496"},
	{"whitespace", "invoice.generate", " {\n\t\"invoice\" : \"INV-1\" , \"amount_cents\" : 1200 ,\r\n \"currency\":\"EUR\"} ", "718cfb10fadae58f394af62cb45883f8049f13edd91fa0c7e723a3f4e61442dc"},
}

func TestFingerprintGolden(t *testing.T) {
	t.Parallel()
	for _, g := range goldenFingerprints {
		got, err := engine.FingerprintOf(g.kind, []byte(g.payload))
		if err != nil {
			t.Errorf("%s: FingerprintOf(%q, %s): %v", g.name, g.kind, g.payload, err)
			continue
		}
		if got != g.want {
			t.Errorf("%s: FingerprintOf(%q, %s) = %s, want %s", g.name, g.kind, g.payload, got, g.want)
		}
	}
}

// A fingerprint depends on the kind and the content of the payload, not
// on its key order or spacing.
func ExampleFingerprintOf() {
	a, _ := engine.FingerprintOf("invoice.generate", []byte(`{"invoice":"INV-1","amount_cents":1200}`))
	b, _ := engine.FingerprintOf("invoice.generate", []byte(`{ "amount_cents": 1200, "invoice": "INV-1" }`))
	canon, _ := engine.CanonicalJSON([]byte(`{ "amount_cents": 12.00e2, "invoice": "INV-1" }`))
	fmt.Println(a == b)
	fmt.Println(string(canon))
	// Output:
	// true
	// {"amount_cents":1200,"invoice":"INV-1"}
}
