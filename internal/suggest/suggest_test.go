package suggest

import "testing"

func TestClosest(t *testing.T) {
	t.Parallel()
	candidates := []string{"store", "output", "retry", "ctrl", "pgup", "pgdown"}
	tests := []struct{ s, want string }{
		{"stor", "store"},    // a deletion
		{"outptu", "output"}, // a swap of neighbours is one edit
		{"retri", "retry"},   // a substitution
		{"ctlr", "ctrl"},
		{"pgdn", "pgup"}, // two edits from both: the first listed wins
		{"store", "store"},
		{"xyzzy", ""}, // nothing within two edits
		{"", ""},
	}
	for _, tc := range tests {
		if got := Closest(tc.s, candidates); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "ab", 2},
		{"kitten", "sitting", 3}, {"ab", "ba", 1}, {"ca", "abc", 3},
	}
	for _, tc := range tests {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
