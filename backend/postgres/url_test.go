package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// TestParseURLClaimCursor: claim_cursor takes a duration or off, is taken
// off before pgx sees the URL, and refuses anything else by name.
func TestParseURLClaimCursor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		param string
		want  time.Duration
		bad   bool
	}{
		{"", 0, false},
		{"&claim_cursor=10ms", 10 * time.Millisecond, false},
		{"&claim_cursor=off", -1, false},
		{"&claim_cursor=0", -1, false},
		{"&claim_cursor=-5ms", 0, true},
		{"&claim_cursor=soon", 0, true},
		{"&x=%zz", 0, true},
		{"&password=Hunter2%zz", 0, true},
	} {
		c, err := parseURL("postgres://u@127.0.0.1:5432/test?schema=s" + tc.param)
		if tc.bad {
			if !errors.Is(err, sluicetype.ErrInvalid) {
				t.Errorf("%q: err %v, want ErrInvalid", tc.param, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.param, err)
		}
		if c.claimCursorAfter != tc.want {
			t.Errorf("%q: claimCursorAfter %v, want %v", tc.param, c.claimCursorAfter, tc.want)
		}
		if _, ok := c.pool.ConnConfig.RuntimeParams["claim_cursor"]; ok {
			t.Errorf("%q: claim_cursor reached pgx as a runtime parameter", tc.param)
		}
	}
}
