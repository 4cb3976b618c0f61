package cli

import (
	"strings"
	"testing"
	"time"
)

// TestConsoleCanaryHaltsInTheOutage: on the demo, a canary retry of the
// outage's error group, started from the console while the outage
// lasts, redrives its sample of 20, sees them die again and halts itself,
// saying why, with the rest of the group untouched; once the outage is
// over, O on :operations resumes it and it redrives the rest to the end.
func TestConsoleCanaryHaltsInTheOutage(t *testing.T) {
	bin := e2eBinary(t)
	const outage = 90 * time.Second
	seeded := time.Now()
	c := startDemoWith(t, bin, "", "--outage", outage.String())

	// The outage's group, while it lasts: b previews its retry, C types
	// the canary's size, enter keeps the default threshold, y runs it.
	c.waitUntil("archived at 4,180 or more", 90*time.Second, func(s string) bool {
		return strings.Contains(s, "▸archived") && tab(t, s, archivedTab) >= 4180
	})
	c.command("errors")
	c.waitFor(`(?m)^. billing\s+invoice\.generate\s+(?:open\s+)?[\d,]+ .*dial tcp <addr>: connection refused`, 90*time.Second)
	c.cursorTo(`connection refused`, 15*time.Second)
	c.send("b")
	c.waitFor(`retry [\d,]+ jobs \(state archived, queue billing, kind invoice\.generate, error group "dial tcp`, 30*time.Second)
	c.waitFor(`canary \[\s*\] none · C: sample first`, 10*time.Second)
	c.send("C")
	c.typeText("20")
	c.send("Enter")
	c.waitFor(`halt above \[▏\]`, 10*time.Second)
	c.send("Enter")
	c.waitFor(`canary \[\s*20\] a sample first, on at 90% ok · halt above \[20%\]`, 10*time.Second)
	if time.Now().After(seeded.Add(outage - 20*time.Second)) {
		t.Skip("the machine is too slow: the outage is nearly over before the canary starts")
	}
	c.send("y")

	// Its sample dies again in the outage: the run halts, the rest of
	// the group untouched (none of it processed), and says what to do.
	c.waitFor(`Bulk retry — halted`, 120*time.Second)
	c.waitFor(`halted: canary sample 20: 0 ok, 20 failed`, 10*time.Second)
	c.waitFor(`0 / [\d,]+ processed`, 10*time.Second)
	c.waitFor(`:operations — O resumes it, c cancels it`, 10*time.Second)
	c.send("Escape")
	c.waitUntil("the dialog closed", 10*time.Second, func(s string) bool { return !strings.Contains(s, "Bulk retry — ") })

	// The outage is over: O on :operations resumes it, and it redrives
	// the rest, which succeed, to the end.
	for time.Now().Before(seeded.Add(outage + 2*time.Second)) {
		time.Sleep(200 * time.Millisecond) // a wait for the outage's end, not a measurement
	}
	c.command("operations")
	c.waitFor(`retry\s+halted`, 15*time.Second)
	c.send("O")
	c.waitFor(`Resume operation`, 10*time.Second)
	c.send("y")
	c.waitFor(`retry\s+(?:pending|running)`, 30*time.Second)
	screen := c.waitFor(`retry\s+completed\s+\S+\s+100%\s+[\d,]+\s+[\d,]+\s+([\d,]+)\s+0 `, 300*time.Second)
	if n := number(t, screen[1]); n < 4000 {
		t.Fatalf("the resumed run completed with %d ok, want the outage's backlog:\n%s", n, screen[0])
	}
}
