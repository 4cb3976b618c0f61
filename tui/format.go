package tui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/sluicehq/sluice/engine"
)

// Text helpers. Widths are terminal cells; inputs are sanitized already.

// fit cuts s to w cells (with an ellipsis) and pads it to exactly w.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		s = ansi.Truncate(s, w, "…")
		sw = ansi.StringWidth(s)
	}
	if sw < w {
		s += strings.Repeat(" ", w-sw)
	}
	return s
}

// fitRight is fit, aligned right.
func fitRight(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return strings.Repeat(" ", w-sw) + s
}

// clip cuts s to at most w cells without padding.
func clip(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// fitEnd keeps the end of an id that does not fit: where ids of one
// kind differ (demo-seed-0239, UUIDv7's random tail).
func fitEnd(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := ansi.StringWidth(s)
	if n <= w {
		return s + strings.Repeat(" ", w-n)
	}
	r := []rune(s)
	if len(r) != n || w < 2 { // wide runes: keep it simple
		return fit(s, w)
	}
	return "…" + string(r[len(r)-(w-1):])
}

// fitMiddle cuts an id in the middle, keeping both ends: UUIDv7 ids share
// their leading time bits, so the tail is what tells them apart.
func fitMiddle(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := ansi.StringWidth(s)
	if n <= w {
		return s + strings.Repeat(" ", w-n)
	}
	if w < 5 {
		return fit(s, w)
	}
	r := []rune(s)
	if len(r) != n { // wide runes: keep it simple
		return fit(s, w)
	}
	head := (w - 1) / 2
	tail := w - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// wrap breaks s into lines of at most w cells.
func wrap(s string, w int) []string {
	if w <= 0 {
		return nil
	}
	if ansi.StringWidth(s) <= w {
		return []string{s}
	}
	return strings.Split(ansi.Wrap(s, w, " ,/"), "\n")
}

// commas writes n with thousands separators: 4213 → 4,213.
func commas(n int64) string {
	if n < 0 {
		return "-" + commas(-n)
	}
	s := strconv.FormatInt(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// age writes how long ago t was, in its largest unit: 42s, 5m, 3h, 12d.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		return "0s"
	}
	return shortDur(d)
}

// shortDur writes a duration in its largest unit.
func shortDur(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// shortDurUp is shortDur rounded up, for what is still to come (an ETA, a
// deletion): 1m59s left is "2m", not "1m", and a time 14 days ahead is
// "14d" for the whole of its first day.
func shortDurUp(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	units := []struct {
		unit, below time.Duration
		suffix      string
	}{{time.Second, time.Minute, "s"}, {time.Minute, time.Hour, "m"}, {time.Hour, 48 * time.Hour, "h"}}
	for _, u := range units {
		if n := (d + u.unit - 1) / u.unit; n*u.unit < u.below {
			return fmt.Sprintf("%d%s", n, u.suffix)
		}
	}
	return fmt.Sprintf("%dd", (d+24*time.Hour-1)/(24*time.Hour))
}

// perSecond writes a rate: a decimal below 10 (1.9/s, not 1/s under a
// limit of 2), a whole number with commas above.
func perSecond(r float64) string {
	if r < 9.95 {
		return fmt.Sprintf("%.1f/s", r)
	}
	return commas(int64(math.Round(r))) + "/s"
}

// ago is age with " ago", or "in …" for the future.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t.After(now) {
		return "in " + shortDurUp(t.Sub(now))
	}
	return shortDur(now.Sub(t)) + " ago"
}

// stamp is a time for the detail sheet: absolute (UTC) and relative.
func stamp(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " (" + ago(now, t) + ")"
}

// plural writes "1 job", "3 jobs".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return commas(n) + " " + many
}

// padLines makes lines exactly h long (cut or padded with blanks).
func padLines(lines []string, h int) []string {
	if h <= 0 {
		return nil
	}
	if len(lines) > h {
		return lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines
}

// overlay draws box lines over base lines at column x, row y.
func overlay(base []string, box []string, x, y, width int) []string {
	out := make([]string, len(base))
	copy(out, base)
	for i, bl := range box {
		row := y + i
		if row < 0 || row >= len(out) {
			continue
		}
		line := out[row]
		bw := ansi.StringWidth(bl)
		left := ansi.Truncate(line, x, "")
		if lw := ansi.StringWidth(left); lw < x {
			left += strings.Repeat(" ", x-lw)
		}
		right := ""
		if lw := ansi.StringWidth(line); lw > x+bw {
			right = ansi.TruncateLeft(line, x+bw, "")
		}
		out[row] = clip(left+"\x1b[0m"+bl+"\x1b[0m"+right, width)
	}
	return out
}

// retentionLine says when retention deletes a terminal job: at the first
// maintenance sweep after deleteAt, or never.
func retentionLine(now time.Time, queue string, st engine.State, deleteAt *time.Time) string {
	switch {
	case deleteAt == nil:
		return "kept forever (" + string(st) + " in " + queue + ")"
	case !deleteAt.After(now):
		return "deleted at the next maintenance sweep (due " + stamp(now, *deleteAt) + ")"
	}
	return "deleted " + stamp(now, *deleteAt)
}

// retentionTerminal orders the terminal states in the queues screen's
// retention column.
var retentionTerminal = []engine.State{engine.StateArchived, engine.StateQuarantined, engine.StateUndecodable,
	engine.StateCompleted, engine.StateCancelled}

// retentionSummary writes a queue's retention: states sharing a retention
// together, "archived, quarantined, undecodable 14d · completed, cancelled
// 1d"; a state with none is kept forever. "not known" when the engine did
// not say (a server of an older version).
func retentionSummary(r map[engine.State]time.Duration) string {
	if r == nil {
		return "not known"
	}
	var order []string
	groups := map[string][]string{}
	for _, st := range retentionTerminal {
		v := "forever"
		if d, ok := r[st]; ok {
			v = engine.FormatRetention(d)
		}
		if _, ok := groups[v]; !ok {
			order = append(order, v)
		}
		groups[v] = append(groups[v], string(st))
	}
	parts := make([]string, len(order))
	for i, v := range order {
		parts[i] = strings.Join(groups[v], ", ") + " " + v
	}
	return strings.Join(parts, " · ")
}
