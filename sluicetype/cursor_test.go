package sluicetype

import (
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)
	tests := []Cursor{
		{At: at, ID: "job-1", Dir: CursorNext},
		{At: at, ID: "job-1", Dir: CursorPrev},
		{At: at.In(time.FixedZone("x", -5*3600)), ID: "3f2b8c1e-9a4d-4e5f-8a6b-1c2d3e4f5a6b", Dir: CursorNext},
		{At: time.Unix(0, 0), ID: "a", Dir: CursorPrev},
		{At: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), ID: "zero-ish", Dir: CursorNext},
		{At: time.Date(1960, 1, 1, 0, 0, 0, 1, time.UTC), ID: "before epoch", Dir: CursorNext},
		{At: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), ID: "late", Dir: CursorPrev},
		{At: at, ID: "ünïcödé ~retry~ 0011aabb", Dir: CursorNext},
		{At: at, ID: strings.Repeat("x", cursorMaxID), Dir: CursorNext},
	}
	for i, c := range tests {
		s := c.Encode()
		if strings.ContainsAny(s, "+/=") {
			t.Errorf("%d: %q is not unpadded base64url", i, s)
		}
		got, err := DecodeCursor(s)
		if err != nil {
			t.Fatalf("%d: DecodeCursor(%q): %v", i, s, err)
		}
		if !got.At.Equal(c.At) || got.ID != c.ID || got.Dir != c.Dir {
			t.Errorf("%d: round trip %+v → %+v", i, c, got)
		}
		if got.At.Location() != time.UTC {
			t.Errorf("%d: decoded time not in UTC", i)
		}
		if again := got.Encode(); again != s {
			t.Errorf("%d: re-encode %q != %q", i, again, s)
		}
	}
}

func TestCursorEmptyDirIsNext(t *testing.T) {
	t.Parallel()
	c, err := DecodeCursor(Cursor{At: time.Unix(1, 0), ID: "a"}.Encode())
	if err != nil || c.Dir != CursorNext {
		t.Fatalf("got %+v, %v", c, err)
	}
}

func TestOperationCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := OperationCursor{CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), ID: "op-1"}
	s := c.Encode()
	got, err := DecodeOperationCursor(s)
	if err != nil || !got.CreatedAt.Equal(c.CreatedAt) || got.ID != c.ID {
		t.Fatalf("round trip %+v → %+v, %v", c, got, err)
	}
	// The two kinds of cursor are not interchangeable.
	if _, err := DecodeCursor(s); !errors.Is(err, ErrInvalid) {
		t.Errorf("DecodeCursor(operation cursor) = %v, want ErrInvalid", err)
	}
	jc := Cursor{At: c.CreatedAt, ID: "j", Dir: CursorNext}.Encode()
	if _, err := DecodeOperationCursor(jc); !errors.Is(err, ErrInvalid) {
		t.Errorf("DecodeOperationCursor(job cursor) = %v, want ErrInvalid", err)
	}
}

func rawCursor(b ...[]byte) string {
	var all []byte
	for _, p := range b {
		all = append(all, p...)
	}
	return base64.RawURLEncoding.EncodeToString(all)
}

func TestDecodeCursorMalformed(t *testing.T) {
	t.Parallel()
	good := Cursor{At: time.Unix(1700000000, 5), ID: "job-1", Dir: CursorNext}.Encode()
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	key := raw[3:15]
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"bad base64", "!!!not base64!!!", "not base64url"},
		{"padded", good + "=", "not base64url"},
		{"std alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(rawCursor([]byte{1, 'j', 'n', 0xfb, 0xff, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'a'})), "not base64url"},
		{"one byte", rawCursor([]byte{1}), "too short"},
		{"no dir", rawCursor([]byte{1, 'j'}), "too short"},
		{"truncated key", good[:12], "too short"},
		{"non-canonical trailing bits", good[:len(good)-1] + string(good[len(good)-1]+1), "not base64url"},
		{"truncated id", rawCursor([]byte{1, 'j', 'n'}, key), "no id"},
		{"wrong version", rawCursor([]byte{2, 'j', 'n'}, key, []byte("a")), "unknown version 2"},
		{"version zero", rawCursor([]byte{0, 'j', 'n'}, key, []byte("a")), "unknown version 0"},
		{"unknown type", rawCursor([]byte{1, 'x', 'n'}, key, []byte("a")), "unknown type"},
		{"unknown direction", rawCursor([]byte{1, 'j', 'x'}, key, []byte("a")), "unknown direction"},
		{"bad nanoseconds", rawCursor([]byte{1, 'j', 'n'}, key[:8], []byte{0xff, 0xff, 0xff, 0xff}, []byte("a")), "bad time"},
		{"bad utf-8 id", rawCursor([]byte{1, 'j', 'p'}, key, []byte{0xff}), "bad id"},
		{"too long id", rawCursor([]byte{1, 'j', 'p'}, key, []byte(strings.Repeat("x", cursorMaxID+1))), "too long"},
		{"too long text", strings.Repeat("A", cursorMaxEncoded+1), "too long"},
		{"json", `{"at":"2024-01-01T00:00:00Z","id":"x"}`, "not base64url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := DecodeCursor(tt.in)
			if err == nil {
				t.Fatalf("DecodeCursor(%q) = %+v, want an error", tt.in, c)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeCursor(%q) = %v, want ErrInvalid containing %q", tt.in, err, tt.want)
			}
		})
	}
	// Cut anywhere before the id ends in the fixed part: always refused.
	for n := range len(good) {
		if n*6/8 <= 3+12 {
			if _, err := DecodeCursor(good[:n]); !errors.Is(err, ErrInvalid) {
				t.Errorf("DecodeCursor(%q) = %v, want ErrInvalid", good[:n], err)
			}
		}
	}
}

func TestDecodeCursorRandomBytes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		for _, s := range []string{string(b), base64.RawURLEncoding.EncodeToString(b)} {
			c, err := DecodeCursor(s)
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("DecodeCursor(%q): %v does not wrap ErrInvalid", s, err)
				}
				continue
			}
			if c.Encode() != s {
				t.Fatalf("DecodeCursor(%q) accepted %+v, which encodes to %q", s, c, c.Encode())
			}
		}
		if _, err := DecodeOperationCursor(base64.RawURLEncoding.EncodeToString(b)); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("DecodeOperationCursor: %v", err)
		}
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(Cursor{At: time.Unix(1700000000, 5), ID: "job-1", Dir: CursorNext}.Encode())
	f.Add(Cursor{At: time.Unix(-1, 999999999), ID: "ü", Dir: CursorPrev}.Encode())
	f.Add(OperationCursor{CreatedAt: time.Unix(1, 0), ID: "op"}.Encode())
	f.Add("")
	f.Add("AQ")
	f.Add("AWpu")
	f.Add("!!!")
	f.Add(strings.Repeat("_", 100))
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("DecodeCursor(%q): %v does not wrap ErrInvalid", s, err)
			}
		} else {
			back, err := DecodeCursor(c.Encode())
			if err != nil || !back.At.Equal(c.At) || back.ID != c.ID || back.Dir != c.Dir {
				t.Fatalf("DecodeCursor(%q) = %+v, which does not round trip: %+v, %v", s, c, back, err)
			}
		}
		if oc, err := DecodeOperationCursor(s); err == nil {
			back, err := DecodeOperationCursor(oc.Encode())
			if err != nil || !back.CreatedAt.Equal(oc.CreatedAt) || back.ID != oc.ID {
				t.Fatalf("DecodeOperationCursor(%q) = %+v, which does not round trip", s, oc)
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("DecodeOperationCursor(%q): %v does not wrap ErrInvalid", s, err)
		}
	})
}
