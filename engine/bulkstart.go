package engine

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Bounds of a bulk run's start time (BulkParams.StartAt), by the store's
// clock: a start up to BulkStartSkew in the past starts at once (the
// caller's clock and the store's differ a little, and a time typed to the
// minute has partly passed), one further back is refused as a mistake; a
// start more than MaxBulkStartAhead ahead is refused too, since its plan
// would by then describe a store that has long moved on.
const (
	BulkStartSkew     = time.Minute
	MaxBulkStartAhead = 7 * 24 * time.Hour
)

// ParseStartAt reads a bulk run's start time as an operator types it: an
// RFC 3339 time, or HH:MM, the next time the clock of now's location
// shows it (today, or tomorrow once it has passed). The answer is in UTC,
// as it is sent; the bounds are the server's to check (checkStartAt).
func ParseStartAt(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	hm, err := time.Parse("15:04", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: start time %q: want HH:MM (the next time the clock shows it) or an RFC 3339 time", ErrInvalid, s)
	}
	t := time.Date(now.Year(), now.Month(), now.Day(), hm.Hour(), hm.Minute(), 0, 0, now.Location())
	if !t.After(now) {
		t = time.Date(now.Year(), now.Month(), now.Day()+1, hm.Hour(), hm.Minute(), 0, 0, now.Location())
	}
	return t.UTC(), nil
}

// checkStartAt refuses a run's start time that is past by more than
// BulkStartSkew or further ahead than MaxBulkStartAhead, by the store's
// clock; it reads the clock only for a run that has a start time.
func (e *Engine) checkStartAt(ctx context.Context, p *BulkParams) error {
	if p.StartAt == nil {
		return nil
	}
	if !p.DryRun && p.Plan == nil {
		return fmt.Errorf("%w: a scheduled bulk run starts only from a dry run's plan, so that it takes what the preview counted however late it starts: dry-run it first, then run it with the plan and the start time", ErrInvalid)
	}
	now, err := e.store.Now(ctx)
	if err != nil {
		return fmt.Errorf("bulk: store clock: %w", err)
	}
	at := p.StartAt.UTC()
	switch {
	case at.Before(now.Add(-BulkStartSkew)):
		return fmt.Errorf("%w: start time %s is in the past (the store's clock reads %s)", ErrInvalid,
			at.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case at.After(now.Add(MaxBulkStartAhead)):
		return fmt.Errorf("%w: start time %s is more than %s ahead (the store's clock reads %s)", ErrInvalid,
			at.Format(time.RFC3339), "7 days", now.UTC().Format(time.RFC3339))
	}
	return nil
}

// StartMark says when a scheduled operation starts, in now's location:
// "scheduled for 06:00 (in 3h12m)", with the date when it is not within
// the next day; "" for an operation that does not wait (Waiting). The
// console's :operations and sluice operations draw it.
func StartMark(op *Operation, now time.Time) string {
	if op == nil || !op.Waiting(now) {
		return ""
	}
	at := op.StartAt.In(now.Location())
	clock := at.Format("15:04")
	if at.Sub(now) >= 24*time.Hour {
		clock = at.Format("Mon 2 Jan 15:04")
	}
	return fmt.Sprintf("scheduled for %s (in %s)", clock, untilText(at.Sub(now)))
}

// untilText is a wait to the minute ("3h12m", "12m", "2d4h"), and "under
// a minute" below one.
func untilText(d time.Duration) string {
	d = d.Truncate(time.Minute)
	switch {
	case d < time.Minute:
		return "under a minute"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}
