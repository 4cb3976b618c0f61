package api

import (
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// checkBounds refuses a selector whose lists are past the engine's filter
// bounds before they are merged (merging drops repeats, which costs the
// square of a list's length): thousands of values cost no more than
// their refusal. engine.Filter.Validate checks the merged filter again.
func (s *selectorWire) checkBounds() error {
	for _, l := range []struct {
		what   string
		n, max int
	}{
		{"states", len(s.States), engine.MaxFilterValues},
		{"queues", len(s.Queues), engine.MaxFilterValues},
		{"kinds", len(s.Kinds), engine.MaxFilterValues},
		{"tags", len(s.Tags), engine.MaxFilterValues},
		{"ids", len(s.IDs), engine.MaxApplyIDs},
		{"payload and meta terms", len(s.Payload) + len(s.Meta), engine.MaxFilterPaths},
	} {
		if l.n > l.max {
			return fmt.Errorf("%w: selector: %d %s; at most %d", engine.ErrInvalid, l.n, l.what, l.max)
		}
	}
	return nil
}
