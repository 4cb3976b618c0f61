package engine

import "testing"

// While a crash of a fingerprint is being written, a slot passes over the
// held jobs of that fingerprint (the crash hands them back, so that its
// quarantine holds them) and takes the others in claim order; the
// hand-back takes exactly that fingerprint's jobs and keeps the rest in
// order. Once the write has ended, held jobs start as before.
func TestCrashGateHeldJobs(t *testing.T) {
	t.Parallel()
	e := &Engine{}
	q := &queueRunner{e: e}
	for _, x := range []struct{ id, fp string }{
		{"f1", "F"}, {"g1", "G"}, {"f2", "F"}, {"n1", ""}, {"g2", "G"},
	} {
		q.buf = append(q.buf, heldJob{j: &Job{ID: x.id, Fingerprint: x.fp}})
	}
	ids := func(hs []heldJob) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.j.ID)
		}
		return out
	}
	same := func(got, want []string) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}

	end := e.crashes.begin("F")
	if e.crashes.startable("F") || !e.crashes.startable("G") || !e.crashes.startable("") {
		t.Fatal("startable: want F blocked, G and no fingerprint not")
	}
	h, ok := q.nextLocked()
	if !ok || h.j.ID != "g1" {
		t.Fatalf("next during F's crash: %v %v, want g1", ok, h.j)
	}
	if got := ids(q.takeHeld("F")); !same(got, []string{"f1", "f2"}) {
		t.Fatalf("taken: %v, want [f1 f2]", got)
	}
	if got := ids(q.buf); !same(got, []string{"n1", "g2"}) {
		t.Fatalf("kept: %v, want [n1 g2]", got)
	}
	end()
	end() // ending twice is harmless

	if !e.crashes.startable("F") || e.crashes.writing.Load() != 0 {
		t.Fatal("F still blocked after its crash's write")
	}
	q.buf = append([]heldJob{{j: &Job{ID: "f3", Fingerprint: "F"}}}, q.buf...)
	for _, want := range []string{"f3", "n1", "g2"} {
		if h, ok := q.nextLocked(); !ok || h.j.ID != want {
			t.Fatalf("next after the write: %v %v, want %s", ok, h.j, want)
		}
	}
	if _, ok := q.nextLocked(); ok || q.buf != nil {
		t.Fatalf("next on an empty buffer: %v, buf %v", ok, q.buf)
	}

}
