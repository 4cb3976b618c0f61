package outage_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/outage"
	"github.com/sluicehq/sluice/sluicetype"
)

// outageLog is an Outage logging at every level to a buffer.
// Settle is off (the first success ends an outage) unless settle is set.
func outageLog(minB, maxB, settle time.Duration) (*outage.Outage, *bytes.Buffer) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if settle == 0 {
		settle = -1
	}
	return outage.New(log, "claim", outage.Options{MinBackoff: minB, MaxBackoff: maxB, Settle: settle}), &buf
}

// linesAt are the lines of buf logged at level.
func linesAt(buf *bytes.Buffer, level string) []string {
	var out []string
	for l := range strings.SplitSeq(buf.String(), "\n") {
		if strings.Contains(l, "level="+level+" ") {
			out = append(out, l)
		}
	}
	return out
}

var errDown = fmt.Errorf("claim: %w", errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))

func TestOutageLogsOncePerOutage(t *testing.T) {
	o, buf := outageLog(time.Millisecond, time.Second, 0)
	o.Succeed() // no outage yet: nothing to say
	for range 50 {
		o.Fail(errDown, "queue", "q1")
	}
	if !o.Down() {
		t.Fatal("Down() = false after failures")
	}
	o.Succeed()
	o.Succeed()
	if o.Down() {
		t.Fatal("Down() = true after a success")
	}

	warns, infos := linesAt(buf, "WARN"), linesAt(buf, "INFO")
	if len(warns) != 1 || len(infos) != 1 {
		t.Fatalf("got %d WARN and %d INFO lines, want 1 and 1:\n%s", len(warns), len(infos), buf)
	}
	for _, want := range []string{"loop=claim", "connection refused", "queue=q1"} {
		if !strings.Contains(warns[0], want) {
			t.Errorf("WARN %q lacks %q", warns[0], want)
		}
	}
	for _, want := range []string{`msg="store reachable again"`, "loop=claim", "failed_attempts=50", "outage="} {
		if !strings.Contains(infos[0], want) {
			t.Errorf("INFO %q lacks %q", infos[0], want)
		}
	}
	if n := len(linesAt(buf, "DEBUG")); n != 49 {
		t.Errorf("%d DEBUG lines, want 49 (the outage's later failures)", n)
	}

	// A second outage is told again.
	o.Fail(errDown)
	o.Fail(errDown)
	o.Succeed()
	if w, i := len(linesAt(buf, "WARN")), len(linesAt(buf, "INFO")); w != 2 || i != 2 {
		t.Fatalf("after a second outage: %d WARN and %d INFO lines, want 2 and 2:\n%s", w, i, buf)
	}
}

// A refusal (the store answered) is the caller's to log: no outage opens
// and none closes.
func TestOutageIgnoresRefusals(t *testing.T) {
	o, buf := outageLog(time.Millisecond, time.Second, 0)
	for _, err := range []error{sluicetype.ErrLeaseLost, fmt.Errorf("x: %w", sluicetype.ErrInvalid), &sluicetype.StateError{}} {
		if outage.StoreUnavailable(err) {
			t.Errorf("outage.StoreUnavailable(%v) = true, want false", err)
		}
		o.Fail(err)
	}
	if o.Down() {
		t.Error("Down() = true after refusals only")
	}
	o.Succeed()
	if buf.Len() != 0 {
		t.Errorf("refusals logged:\n%s", buf)
	}
	if !outage.StoreUnavailable(errDown) || !outage.StoreUnavailable(sluicetype.ErrClosed) {
		t.Error("a driver error or ErrClosed is not taken for the store being unavailable")
	}
}

func TestOutageBackoffGrowsCapsAndResets(t *testing.T) {
	const minB, maxB = 10 * time.Millisecond, 80 * time.Millisecond
	o, _ := outageLog(minB, maxB, 0)
	check := func(nominal time.Duration) {
		t.Helper()
		d := o.Fail(errDown)
		if d < nominal/2 || d > nominal {
			t.Fatalf("backoff %v, want within [%v, %v]", d, nominal/2, nominal)
		}
	}
	for _, nominal := range []time.Duration{10, 20, 40, 80, 80, 80, 80} {
		check(nominal * time.Millisecond)
	}
	o.Succeed()
	check(minB)
	check(2 * minB)
	// A refusal grows it too, so a loop meeting one does not spin, and a
	// success resets it.
	o.Succeed()
	o.Fail(sluicetype.ErrInvalid)
	check(2 * minB)
}

// A store that flaps while it goes away (some attempts get through on a
// connection that lives on) is one outage: no WARN per flap, and no INFO
// before a settle period without failure. The settle period here is an
// hour, so the outage cannot end within the test.
func TestOutageFlappingIsOneOutage(t *testing.T) {
	o, buf := outageLog(time.Millisecond, time.Second, time.Hour)
	for range 20 {
		o.Fail(errDown)
		o.Fail(errDown)
		o.Succeed()
		if o.Down() {
			t.Fatal("Down() = true right after a success")
		}
	}
	o.Fail(errDown)
	if !o.Down() {
		t.Fatal("Down() = false after a failure")
	}
	if w, i := len(linesAt(buf, "WARN")), len(linesAt(buf, "INFO")); w != 1 || i != 0 {
		t.Fatalf("flapping store: %d WARN and %d INFO lines, want 1 and 0:\n%s", w, i, buf)
	}
	// The backoff resets at each success all the same: the store answered.
	if d := o.Fail(errDown); d > 2*time.Millisecond {
		t.Errorf("backoff %v after a success and one failure, want at most 2ms", d)
	}
}
