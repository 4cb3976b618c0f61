package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// From an sluicetype.Filter to a WHERE clause. Every value is bound as a
// parameter; the SQL text holds only column names, operators, the fixed
// terms below and state names the engine validated (literals, so the
// planner can prove a partial index's predicate even in a generic plan).
//
// What each field means is as on SQLite (backend/sqlite/filter.go); here:
//   - tags: tags && the given tags (any of them).
//   - error: strpos(last_error, value) > 0 (case-sensitive substring).
//   - payload.<path>:value and meta.<key>:value, as
//     sluicetype.PathValueMatches states: jsonb containment (@>), which the
//     GIN indexes jobs_payload and jobs_metadata serve: the value at the
//     path is the JSON string value, or, when value is a JSON number,
//     true, false or null, that value; an object or array value is
//     contained and then equal as jsonb (members in any order, numbers
//     by value). A missing path matches nothing, so an empty document (or
//     none) never matches: the indexes leave those out.

// args numbers the parameters of one statement.
type args struct{ vals []any }

// add binds v and returns its placeholder.
func (a *args) add(v any) string {
	a.vals = append(a.vals, v)
	return "$" + strconv.Itoa(len(a.vals))
}

// where gathers the AND-ed terms of a WHERE clause; its arguments go to a
// shared args, so branches of one statement may each add their own terms.
// fps is the store's job_fingerprints table, schema-qualified: the
// clause's text does not pass through Store.sql.
type where struct {
	a     *args
	fps   string
	terms []string
}

// newWhere starts a clause over the store's jobs.
func (s *Store) newWhere(a *args) *where {
	if a == nil {
		a = &args{}
	}
	return &where{a: a, fps: s.sql("{s}.job_fingerprints")}
}

func (w *where) add(term string) { w.terms = append(w.terms, term) }

func (w *where) clone() *where { return &where{a: w.a, fps: w.fps, terms: slices.Clone(w.terms)} }

// sql is the clause's text without the WHERE keyword.
func (w *where) sql() string {
	if len(w.terms) == 0 {
		return "true"
	}
	return strings.Join(w.terms, " AND ")
}

// in adds col = value or col = ANY(values).
func (w *where) in(col string, vs []string) {
	switch len(vs) {
	case 0:
	case 1:
		w.add(col + " = " + w.a.add(vs[0]))
	default:
		w.add(col + " = ANY(" + w.a.add(vs) + "::text[])")
	}
}

// addStates adds the state condition: literals for valid states.
func (w *where) addStates(states []sluicetype.State) {
	if len(states) == 0 {
		return
	}
	lits := make([]string, 0, len(states))
	for _, st := range states {
		if st.Valid() {
			lits = append(lits, literal(string(st)))
		} else {
			lits = append(lits, w.a.add(string(st))+"::text")
		}
	}
	if len(lits) == 1 {
		w.add("state = " + lits[0])
		return
	}
	w.add("state IN (" + strings.Join(lits, ", ") + ")")
}

// fingerprintIs is the condition that the fingerprint of the jobs row
// (its columns prefixed with prefix: "" or "jobs.") equals arg, written for
// job_fingerprints (migration 0008, the table fps names), which holds every
// job's fingerprint hash and id: the hash finds the ids, the jobs' own
// column drops a collision.
func fingerprintIs(fps, prefix, arg string) string {
	return prefix + "id IN (SELECT job_id FROM " + fps + " WHERE fp = hashtextextended(" + arg + ", 0)) AND " +
		prefix + "fingerprint = " + arg
}

// addFilter adds every field of f but its states.
func (w *where) addFilter(f *sluicetype.Filter) error {
	w.in("queue", f.Queues)
	w.in("kind", f.Kinds)
	w.in("id", f.IDs)
	if f.Fingerprint != "" {
		w.add(fingerprintIs(w.fps, "", w.a.add(f.Fingerprint)))
	}
	if f.UniqueKey != "" {
		// The second term lets a generic plan take jobs_unique_key, a
		// partial index over the jobs with a key.
		w.add("unique_key = " + w.a.add(f.UniqueKey) + "::text")
		w.add("unique_key <> ''")
	}
	if len(f.Tags) > 0 {
		w.add("tags && " + w.a.add(f.Tags) + "::text[]")
	}
	if f.Error != "" {
		w.add("strpos(last_error, " + w.a.add(f.Error) + ") > 0")
	}
	if f.ErrorPattern != "" {
		w.add("error_pattern = " + w.a.add(f.ErrorPattern))
	}
	for _, m := range f.Payload {
		if err := w.addPath("payload", "payload", m); err != nil {
			return err
		}
	}
	for _, m := range f.Meta {
		if err := w.addPath("metadata", "meta", m); err != nil {
			return err
		}
	}
	w.addTime("created_at >", f.CreatedAfter)
	w.addTime("created_at <", f.CreatedBefore)
	w.addTime("finalized_at >", f.FinalizedAfter)
	w.addTime("finalized_at <", f.FinalizedBefore)
	if f.ExpiresWithin != nil {
		w.addExpiring(f.Expiring)
	}
	return nil
}

// addExpiring is expires<D as the engine resolved it (sluicetype.ExpiryCut):
// any cut's state, queues and time, read as retention's sweep reads them
// (sqlDeleteExpired); no cut, no job.
func (w *where) addExpiring(cuts []sluicetype.ExpiryCut) {
	if len(cuts) == 0 {
		w.add("false")
		return
	}
	parts := make([]string, 0, len(cuts))
	for _, c := range cuts {
		before := w.a.add(c.Before.UnixNano())
		p := "(state = " + w.a.add(string(c.State)) + "::text AND state_changed_at < " + before +
			" AND finalized_at < " + before
		if len(c.Queues) > 0 {
			p += " AND queue = ANY(" + w.a.add(c.Queues) + "::text[])"
		}
		if len(c.NotQueues) > 0 {
			p += " AND NOT queue = ANY(" + w.a.add(c.NotQueues) + "::text[])"
		}
		parts = append(parts, p+")")
	}
	w.add("(" + strings.Join(parts, " OR ") + ")")
}

func (w *where) addTime(term string, t *time.Time) {
	if t != nil {
		w.add(term + " " + w.a.add(t.UnixNano()))
	}
}

// addPath matches the value at m.Path in col (see the package comment of
// this file).
func (w *where) addPath(col, what string, m sluicetype.PathMatch) error {
	keys, err := pathKeys(m.Path)
	if err != nil {
		return fmt.Errorf("%w: filter: %s path %q: %v", sluicetype.ErrInvalid, what, m.Path, err)
	}
	str, _ := json.Marshal(m.Value)
	terms := []string{col + " @> " + w.a.add(string(nest(keys, str))) + "::jsonb"}
	switch kind, v := sluicetype.PathValueOf(m.Value); kind {
	case sluicetype.PathValueNumber, sluicetype.PathValueLiteral:
		terms = append(terms, col+" @> "+w.a.add(string(nest(keys, []byte(v))))+"::jsonb")
	case sluicetype.PathValueObject, sluicetype.PathValueArray:
		// Containment narrows to the rows the GIN index finds; equality
		// then holds the value whole (containment alone would take a part
		// for the whole). -> with a text key reads objects only, where #>
		// would index an array.
		path := col
		for _, k := range keys {
			path += " -> " + w.a.add(k) + "::text"
		}
		terms = append(terms, "("+col+" @> "+w.a.add(string(nest(keys, []byte(v))))+"::jsonb AND "+path+" = "+w.a.add(v)+"::jsonb)")
	}
	w.add("(" + strings.Join(terms, " OR ") + ")")
	// No document without the path's first key matches, an empty one
	// least of all: the GIN indexes leave those out (migration 0009), and
	// this term, their predicate's, lets the planner take them.
	w.add(col + " <> '{}'::jsonb")
	return nil
}

// nest wraps a JSON value in objects along keys: a.b and 1 give
// {"a":{"b":1}}.
func nest(keys []string, v []byte) []byte {
	var b []byte
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		b = append(b, '{')
		b = append(b, kb...)
		b = append(b, ':')
	}
	b = append(b, v...)
	for range keys {
		b = append(b, '}')
	}
	return b
}

// pathKeys splits a dot-separated path into its keys.
func pathKeys(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("empty path")
	}
	keys := strings.Split(p, ".")
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "\"\\") {
			return nil, fmt.Errorf("bad key %q", k)
		}
	}
	return keys, nil
}
