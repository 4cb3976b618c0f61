package sluicetype_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

func TestUniqueKeyOf(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	type in struct {
		o       sluicetype.UniqueOpts
		kind, q string
		payload string
		due     time.Time
	}
	base := in{kind: "email", q: "default", payload: `{"to":"a","n":1}`, due: at("2026-03-01T10:05:00Z")}
	with := func(f func(*in)) in { c := base; f(&c); return c }
	cases := []struct {
		name string
		a, b in
		same bool
	}{
		{"kind only: payload ignored", base, with(func(c *in) { c.payload = `{"to":"b"}` }), true},
		{"kind differs", base, with(func(c *in) { c.kind = "sms" }), false},
		{"kind excluded", with(func(c *in) { c.o.ExcludeKind = true }), with(func(c *in) { c.o.ExcludeKind = true; c.kind = "sms" }), true},
		{"queue ignored", base, with(func(c *in) { c.q = "other" }), true},
		{"by queue", with(func(c *in) { c.o.ByQueue = true }), with(func(c *in) { c.o.ByQueue = true; c.q = "other" }), false},
		{"payload canonical", with(func(c *in) { c.o.ByPayload = true }), with(func(c *in) { c.o.ByPayload = true; c.payload = `{ "n":1.0,"to":"a"}` }), true},
		{"payload differs", with(func(c *in) { c.o.ByPayload = true }), with(func(c *in) { c.o.ByPayload = true; c.payload = `{"to":"a","n":2}` }), false},
		{"fields: others ignored", with(func(c *in) { c.o.Fields = []string{"to"} }), with(func(c *in) { c.o.Fields = []string{"to"}; c.payload = `{"to":"a","n":2}` }), true},
		{"fields: order ignored", with(func(c *in) { c.o.Fields = []string{"to", "n"} }), with(func(c *in) { c.o.Fields = []string{"n", "to"} }), true},
		{"fields: value differs", with(func(c *in) { c.o.Fields = []string{"to"} }), with(func(c *in) { c.o.Fields = []string{"to"}; c.payload = `{"to":"b"}` }), false},
		{"same hour", with(func(c *in) { c.o.Period = time.Hour }), with(func(c *in) { c.o.Period = time.Hour; c.due = at("2026-03-01T10:59:59Z") }), true},
		{"next hour", with(func(c *in) { c.o.Period = time.Hour }), with(func(c *in) { c.o.Period = time.Hour; c.due = at("2026-03-01T11:00:00Z") }), false},
		{"no period: time ignored", base, with(func(c *in) { c.due = at("2030-01-01T00:00:00Z") }), true},
		{"states not in the key", base, with(func(c *in) {
			c.o.States = append([]sluicetype.State{sluicetype.StateCompleted}, sluicetype.DefaultUniqueStates...)
		}), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ka, _, err := sluicetype.UniqueKeyOf(&c.a.o, "a", c.a.kind, c.a.q, json.RawMessage(c.a.payload), c.a.due)
			if err != nil {
				t.Fatal(err)
			}
			kb, _, err := sluicetype.UniqueKeyOf(&c.b.o, "b", c.b.kind, c.b.q, json.RawMessage(c.b.payload), c.b.due)
			if err != nil {
				t.Fatal(err)
			}
			if (ka == kb) != c.same {
				t.Fatalf("keys %s and %s: same=%v, want %v", ka, kb, ka == kb, c.same)
			}
			if _, err := sluicetype.ParseQuery("unique:" + ka); err != nil {
				t.Fatalf("the key does not parse as a filter: %v", err)
			}
		})
	}
}

func TestUniqueStatesMask(t *testing.T) {
	_, mask, err := sluicetype.UniqueKeyOf(&sluicetype.UniqueOpts{}, "a", "k", "q", json.RawMessage(`{}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sluicetype.AllStates {
		want := !st.Terminal() || st == sluicetype.StateQuarantined
		if got := sluicetype.UniqueMaskHolds(mask, st); got != want {
			t.Errorf("default mask holds %s: %v, want %v", st, got, want)
		}
	}
}

func TestUniqueFilterQuery(t *testing.T) {
	for _, q := range []string{"unique:abc", "unique:" + strings.Repeat("g", 32), "unique:"} {
		if _, err := sluicetype.ParseQuery(q); err == nil {
			t.Errorf("ParseQuery(%q) accepted", q)
		}
	}
	key := strings.Repeat("AB", 16)
	f, err := sluicetype.ParseQuery("unique:" + key + " state:archived")
	if err != nil {
		t.Fatal(err)
	}
	if f.UniqueKey != strings.ToLower(key) || !strings.Contains(f.String(), "unique:"+strings.ToLower(key)) {
		t.Fatalf("parsed %+v, written %q", f, f.String())
	}
	if !f.Matches(&sluicetype.Job{State: sluicetype.StateArchived, UniqueKey: strings.ToLower(key)}) ||
		f.Matches(&sluicetype.Job{State: sluicetype.StateArchived}) {
		t.Fatal("Matches disagrees with the key")
	}
	if err := (sluicetype.Filter{UniqueKey: "nope"}).Validate(); !errors.Is(err, sluicetype.ErrInvalid) {
		t.Fatalf("Validate of a bad key: %v", err)
	}
}
