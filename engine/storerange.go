package engine

import (
	"math"
	"time"
)

// A filter's times are compared by the stores as nanoseconds since 1970 in
// an int64: 1970-01-01 to 2262-04-11. The grammar takes the years
// 0000–9999, and every time a store writes (its own now) lies inside that
// range, so a bound outside it decides the condition alone: taken to the
// range's nearer end, it compares with every job as the time itself would.
// created>1000-01-01 matches every job and created<1000-01-01 none, on
// every store, in a list, a count, a dry run and the run it plans.

// storeTimeRange is the range of times every store compares.
func storeTimeRange() (lo, hi time.Time) {
	return time.Unix(0, 0).UTC(), time.Unix(0, math.MaxInt64).UTC()
}

// storeFilter is f as the engine hands it to a store: its time bounds
// within storeTimeRange. The caller's filter (a plan's, an operation's
// persisted selector) keeps the times it was given.
func storeFilter(f Filter) Filter {
	lo, hi := storeTimeRange()
	clamp := func(t *time.Time) *time.Time {
		switch {
		case t == nil:
			return nil
		case t.Before(lo):
			return &lo
		case t.After(hi):
			return &hi
		}
		return t
	}
	f.CreatedAfter = clamp(f.CreatedAfter)
	f.CreatedBefore = clamp(f.CreatedBefore)
	f.FinalizedAfter = clamp(f.FinalizedAfter)
	f.FinalizedBefore = clamp(f.FinalizedBefore)
	return f
}
