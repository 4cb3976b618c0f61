package sluicetype

import "fmt"

// Bounds of a Filter, however it comes (the q grammar, the API's query
// string or JSON, the library): each store turns a filter into one query,
// and a filter past them would cost every store more than any operator
// needs (SQLite refuses a statement of 32,766 parameters, PostgreSQL
// plans thousands of JSON terms for seconds). Validate refuses a filter
// past any of them with ErrInvalid, so the caller is told what to narrow
// and no store is asked; ids are bounded by MaxApplyIDs.
const (
	// MaxFilterValues is how many values one list field (states,
	// queues, kinds, tags) may hold.
	MaxFilterValues = 100
	// MaxFilterPaths is how many payload and meta terms a filter may
	// hold, together.
	MaxFilterPaths = 16
	// MaxFilterText is the longest text value in a filter, in bytes: an
	// id, the error text or pattern, a payload or meta value or path.
	MaxFilterText = 1024
	// MaxQueryLength is the longest q string ParseQuery reads, in bytes.
	MaxQueryLength = 16 << 10
)

// checkBounds refuses f past the bounds above.
func (f Filter) checkBounds() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: filter: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	for _, l := range []struct {
		what string
		n    int
	}{{"states", len(f.States)}, {"queues", len(f.Queues)}, {"kinds", len(f.Kinds)}, {"tags", len(f.Tags)}} {
		if l.n > MaxFilterValues {
			return bad("%d %s; at most %d", l.n, l.what, MaxFilterValues)
		}
	}
	if n := len(f.Payload) + len(f.Meta); n > MaxFilterPaths {
		return bad("%d payload and meta terms; at most %d", n, MaxFilterPaths)
	}
	long := func(what, v string) error {
		if len(v) > MaxFilterText {
			return bad("%s of %d bytes; at most %d", what, len(v), MaxFilterText)
		}
		return nil
	}
	texts := []struct{ what, v string }{{"error", f.Error}, {"error pattern", f.ErrorPattern}}
	for _, id := range f.IDs {
		texts = append(texts, struct{ what, v string }{"id", id})
	}
	for _, m := range append(append([]PathMatch{}, f.Payload...), f.Meta...) {
		texts = append(texts, struct{ what, v string }{"path", m.Path}, struct{ what, v string }{"value", m.Value})
	}
	for _, t := range texts {
		if err := long(t.what, t.v); err != nil {
			return err
		}
	}
	return nil
}

// checkQueryLength refuses a q string over MaxQueryLength.
func checkQueryLength(q string) error {
	if len(q) > MaxQueryLength {
		return fmt.Errorf("%w: query of %d bytes; at most %d", ErrInvalid, len(q), MaxQueryLength)
	}
	return nil
}
