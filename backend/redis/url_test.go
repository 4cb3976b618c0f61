package redis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/redis"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestParseURLBudgets reads scan_budget and batch_budget, refuses values
// out of range, and keeps both out of the options go-redis parses.
func TestParseURLBudgets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url   string
		scan  int
		batch time.Duration
		bad   bool
	}{
		{url: "redis://127.0.0.1:6379/0?ns=a"},
		{url: "redis://127.0.0.1:6379/0?ns=a&scan_budget=500&batch_budget=2ms", scan: 500, batch: 2 * time.Millisecond},
		{url: "redis+cluster://127.0.0.1:7000,127.0.0.1:7001?ns=a&batch_budget=250us", batch: 250 * time.Microsecond},
		{url: "redis://127.0.0.1:6379/0?batch_budget=10us", bad: true},
		{url: "redis://127.0.0.1:6379/0?batch_budget=2s", bad: true},
		{url: "redis://127.0.0.1:6379/0?batch_budget=soon", bad: true},
		{url: "redis://127.0.0.1:6379/0?scan_budget=0", bad: true},
		{url: "redis://127.0.0.1:6379/0?ns=a&x=%zz", bad: true},
		{url: "redis+cluster://127.0.0.1:7000?ns=%zz", bad: true},
	} {
		tg, err := redis.ParseURL(c.url)
		if c.bad {
			if !errors.Is(err, sluicetype.ErrInvalid) {
				t.Errorf("%s: err %v, want ErrInvalid", c.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if tg.ScanBudget != c.scan || tg.BatchBudget != c.batch {
			t.Errorf("%s: scan %d batch %v, want %d %v", c.url, tg.ScanBudget, tg.BatchBudget, c.scan, c.batch)
		}
	}
}
