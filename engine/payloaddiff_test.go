package engine

import "testing"

func TestPayloadDiff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, before, after, want string }{
		{"changed", `{"invoice":4,"currency":"EURO","amount":9}`, `{"invoice":4,"currency":"EUR","amount":9}`, `currency: "EURO" → "EUR"`},
		{"nested added removed", `{"a":{"b":1,"c":2},"d":true}`, `{"a":{"b":3},"e":[1,2]}`, `a.b: 1 → 3; a.c removed; d removed; e added: [1,2]`},
		{"same", `{"a":1}`, `{"a":1}`, ``},
		{"not objects", `[1]`, `{"a":1}`, ``},
		{"long value cut", `{"a":"x"}`, `{"a":"0123456789012345678901234567890123456789xyz"}`, `a: "x" → "01234567890123456789012345678901234567…`},
		{"many", `{}`, `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7}`, `a added: 1; b added: 2; c added: 3; d added: 4; e added: 5; and 2 more`},
	} {
		if got := payloadDiff([]byte(c.before), []byte(c.after)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
