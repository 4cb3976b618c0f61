package engine

import "testing"

// A first-crash suspect held ahead of a slot and handed back unrun frees
// its place in the group without growing or shrinking the group, as a
// success or a crash would.
func TestSuspectGateDropped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		end       func(g *suspectGate)
		wantGroup int
	}{
		{"dropped", func(g *suspectGate) { g.dropped(suspectFirst) }, 2},
		{"succeeded", func(g *suspectGate) { g.done(suspectFirst, false) }, 4},
		{"crashed", func(g *suspectGate) { g.done(suspectFirst, true) }, 1},
		{"not a suspect", func(g *suspectGate) { g.dropped(notSuspect) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newSuspectGate(8)
			g.group = 2
			n, _, ok := g.admit(false)
			if !ok || n != 2 {
				t.Fatalf("admit = %d, %v; want 2 suspects", n, ok)
			}
			g.claimed(n, false, 1, false) // the claim found one
			tc.end(g)
			wantFirst := 0
			if tc.name == "not a suspect" {
				wantFirst = 1
			}
			if g.group != tc.wantGroup || g.first != wantFirst {
				t.Errorf("group %d, first %d; want %d, %d", g.group, g.first, tc.wantGroup, wantFirst)
			}
		})
	}
}
