package tui

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// limitsFixture is heldFixture with two more limits: billing's, with a
// rate, and receipt.send's, per customer.
func limitsFixture(t *testing.T) *fixture {
	t.Helper()
	f := heldFixture(t)
	for _, l := range []engine.Limit{
		{Scope: engine.LimitQueue, Name: "billing", Concurrency: 5, Rate: 10, RateWindow: time.Minute},
		{Scope: engine.LimitKind, Name: "receipt.send", Concurrency: 3, Key: "customer"},
	} {
		if err := f.eng.SetLimit(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// limitRow finds the row of a limit on a screen, cursor or not.
func limitRow(screen, scope, name string) string {
	re := regexp.MustCompile(`(?m)^[› ] ` + scope + `\s+` + regexp.QuoteMeta(name) + `\s.*$`)
	return re.FindString(screen)
}

// TestLimitsScreen: :limits lists every limit with what it counts running
// now, its rate and its partition, and follows the store live; L starts
// :limit for the cursor's limit, which asks with the old value and the
// new and is written on y; enter lists the jobs the limit covers that
// wait.
func TestLimitsScreen(t *testing.T) {
	f := limitsFixture(t)
	s := start(t, f.eng, testOptions())
	s.waitFor("no archived jobs")
	s.keys(":")
	s.typeText("limits")
	s.keys("<enter>")
	screen := s.waitFor("Limits — running jobs", "invoice.generate", "receipt.send", "10/1m", "customer")
	s.golden(screen)
	if row := limitRow(screen, "kind", "invoice.generate"); !regexp.MustCompile(`invoice\.generate\s+1\s+1\s+-\s+-`).MatchString(row) {
		t.Fatalf("invoice.generate's row is not limit 1, running 1, no rate, no partition: %q", row)
	}

	// A receipt starts, then an operator cancels lim-0003 elsewhere: the
	// change heard reloads the screen, which shows the receipt running
	// with no key pressed. (A claim alone is heard through the counters'
	// poll, whose first read is its baseline: a claim made before it
	// would go unheard here, though not in a store that keeps changing.)
	ctx := context.Background()
	f.claim(t, ctx, "email", "rcp-0001")
	if _, err := f.eng.Cancel(ctx, "lim-0003"); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "receipt.send running 1 on the screen", func() bool {
		return regexp.MustCompile(`receipt\.send\s+3\s+1\s`).MatchString(limitRow(ansi.Strip(s.h.last()), "kind", "receipt.send"))
	})

	s.keys("L")
	s.waitFor(":limit kind invoice.generate")
	s.typeText("2")
	s.keys("<enter>")
	s.waitFor("Limit kind invoice.generate: 1 → 2?")
	s.keys("y")
	screen = s.waitFor("limit kind invoice.generate: 1 → 2")
	waitCond(t, "invoice.generate's limit 2 on the screen", func() bool {
		return regexp.MustCompile(`invoice\.generate\s+2\s+1\s`).MatchString(limitRow(ansi.Strip(s.h.last()), "kind", "invoice.generate"))
	})
	ls, err := f.eng.ListLimits(ctx)
	if err != nil || len(ls) != 3 || ls[0].Name != "invoice.generate" || ls[0].Concurrency != 2 {
		t.Fatalf("limits after L 2 y: %+v %v\n%s", ls, err, screen)
	}

	s.keys("<enter>")
	screen = s.waitFor("lim-0002", "kind:invoice.generate")
	if strings.Contains(screen, "rcp-0001") || strings.Contains(screen, "lim-0003") {
		t.Fatalf("enter on invoice.generate's limit does not list its waiting jobs:\n%s", screen)
	}
}

// TestLimitsScreenReadOnly: a read-only console lists the limits but
// offers no set: no hint, L opens nothing, and :limit is refused.
func TestLimitsScreenReadOnly(t *testing.T) {
	f := limitsFixture(t)
	opts := testOptions()
	opts.ReadOnly = true
	s := start(t, f.eng, opts)
	s.waitFor("no archived jobs")
	s.keys(":")
	s.typeText("limits")
	s.keys("<enter>")
	screen := s.waitFor("Limits — running jobs", "invoice.generate", "waiting jobs")
	if strings.Contains(screen, "L set") || strings.Contains(screen, "· set") {
		t.Fatalf("a read-only console offers to set a limit:\n%s", screen)
	}
	s.keys("L")
	s.keys(":")
	s.typeText("limit kind invoice.generate 9")
	s.keys("<enter>")
	s.waitFor("read-only: limits cannot be set")
	ls, err := f.eng.ListLimits(context.Background())
	if err != nil || ls[0].Concurrency != 1 {
		t.Fatalf("a read-only console changed a limit: %+v %v", ls, err)
	}
}

// TestLimitsScreenEmpty: with no limit the screen says how to set one.
func TestLimitsScreenEmpty(t *testing.T) {
	f := setup(t, false)
	s := start(t, f.eng, testOptions())
	s.keys(":")
	s.typeText("limits")
	s.keys("<enter>")
	s.waitFor("no limits: :limit kind|queue NAME N sets one")
}
