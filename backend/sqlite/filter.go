package sqlite

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// From an sluicetype.Filter to a WHERE clause. Every value is bound as a
// parameter; the SQL text holds only column names, operators and the
// fixed terms below, so a filter cannot inject anything.
//
// What each field means here:
//   - states, queues, kinds, ids: the column is any of the values.
//   - tags: the job has any of the given tags (the q grammar's rule for list
//     fields: `tag:a,b` matches a or b).
//   - fingerprint, error_pattern: equal.
//   - error: a case-sensitive substring of the last error's message.
//   - payload.<path>:value and meta.<key>:value: the value at the path: a
//     JSON string by its contents ("x" matches x), a number by its value
//     when value is a JSON number (3 matches 3, 3.0 and 3e0), any other
//     value by its JSON text (true matches true, null matches null). Keys
//     are object keys (no array indexes); a missing path matches nothing.
//   - created/finalized after and before: strictly after, strictly before;
//     a job not finalized has no finalized time and matches neither.

// sqlListable is the WHERE term of the partial index jobs_state_changed.
// SQLite uses a partial index only when the query holds its WHERE term
// word for word, so queries over states it covers repeat it.
const sqlListable = `state NOT IN ('available', 'running')`

// sqlDeadIndexed is the WHERE term of the partial index jobs_error_groups.
const sqlDeadIndexed = `(state = 'archived' OR state = 'quarantined' OR state = 'undecodable')`

// hotState reports whether jobs_state_changed leaves s out.
func hotState(s sluicetype.State) bool {
	return s == sluicetype.StateAvailable || s == sluicetype.StateRunning
}

func deadIndexed(s sluicetype.State) bool {
	return s == sluicetype.StateArchived || s == sluicetype.StateQuarantined || s == sluicetype.StateUndecodable
}

// where gathers the AND-ed terms of a WHERE clause and their arguments.
type where struct {
	terms []string
	args  []any
}

func (w *where) add(term string, args ...any) {
	w.terms = append(w.terms, term)
	w.args = append(w.args, args...)
}

// in adds `col IN (?, ...)` for vs.
func (w *where) in(col string, vs []string) {
	switch len(vs) {
	case 0:
		return
	case 1:
		w.add(col+" = ?", vs[0])
		return
	}
	var b strings.Builder
	b.WriteString(col)
	b.WriteString(" IN (")
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('?')
		w.args = append(w.args, v)
	}
	b.WriteByte(')')
	w.terms = append(w.terms, b.String())
}

// sql is the clause's text without the WHERE keyword; "1" when empty.
func (w *where) sql() string {
	if len(w.terms) == 0 {
		return "1"
	}
	return strings.Join(w.terms, " AND ")
}

// clone copies w, so branches of one query can each add their own terms.
func (w *where) clone() *where {
	return &where{terms: slices.Clone(w.terms), args: slices.Clone(w.args)}
}

// addStates adds the state condition, with the partial indexes' own terms
// when every state is one they cover, so the planner may use them.
func (w *where) addStates(states []sluicetype.State) {
	if len(states) == 0 {
		return
	}
	ss := make([]string, len(states))
	listable, dead := true, true
	for i, s := range states {
		ss[i] = string(s)
		listable = listable && !hotState(s)
		dead = dead && deadIndexed(s)
	}
	w.in("state", ss)
	if listable {
		w.add(sqlListable)
	}
	if dead {
		w.add(sqlDeadIndexed)
	}
}

// addFilter adds every field of f but its states (the caller places
// those: a state may choose the index).
func (w *where) addFilter(f *sluicetype.Filter) error {
	w.in("queue", f.Queues)
	w.in("kind", f.Kinds)
	switch len(f.IDs) {
	case 0:
	case 1:
		w.add("id = ?", f.IDs[0])
	default:
		w.add("id IN (SELECT value FROM json_each(?))", jsonStrings(f.IDs))
	}
	if f.Fingerprint != "" {
		w.add("fingerprint = ?", f.Fingerprint)
	}
	if f.UniqueKey != "" {
		// The second term lets SQLite take jobs_unique_key, a partial
		// index over the jobs with a key.
		w.add("unique_key = ?", f.UniqueKey)
		w.add("unique_key <> ''")
	}
	if len(f.Tags) > 0 {
		var b strings.Builder
		b.WriteString("EXISTS (SELECT 1 FROM json_each(jobs.tags) WHERE value IN (")
		for i, t := range f.Tags {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			w.args = append(w.args, t)
		}
		b.WriteString("))")
		w.terms = append(w.terms, b.String())
	}
	if f.Error != "" {
		w.add("instr(last_error, ?) > 0", f.Error)
	}
	if f.ErrorPattern != "" {
		w.add("error_pattern = ?", f.ErrorPattern)
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
	w.addTime("created_at > ?", f.CreatedAfter)
	w.addTime("created_at < ?", f.CreatedBefore)
	w.addTime("finalized_at > ?", f.FinalizedAfter)
	w.addTime("finalized_at < ?", f.FinalizedBefore)
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
		w.add("0")
		return
	}
	parts := make([]string, 0, len(cuts))
	for _, c := range cuts {
		before := c.Before.UnixNano()
		p := "(state = ? AND state_changed_at < ? AND finalized_at < ?"
		w.args = append(w.args, string(c.State), before, before)
		if len(c.Queues) > 0 {
			p += " AND queue IN (SELECT value FROM json_each(?))"
			w.args = append(w.args, jsonStrings(c.Queues))
		}
		if len(c.NotQueues) > 0 {
			p += " AND queue NOT IN (SELECT value FROM json_each(?))"
			w.args = append(w.args, jsonStrings(c.NotQueues))
		}
		parts = append(parts, p+")")
	}
	w.terms = append(w.terms, "("+strings.Join(parts, " OR ")+")")
}

func (w *where) addTime(term string, t *time.Time) {
	if t != nil {
		w.add(term, t.UnixNano())
	}
}

// addPath matches the value at m.Path in col as sluicetype.PathValueMatches
// states, one CASE on the JSON type found there: a string by its contents,
// a number as a number (42 matches 42, 42.0 and 4.2e1), true, false and
// null as themselves, and an object or array by treeEqual. The JSON path
// is bound as a parameter too. A row SQLite's JSON functions cannot read
// (nested past their 1000 levels: written before the engine's limit)
// matches nothing rather than failing the whole statement; CASE evaluates
// json_type only when json_valid passed.
func (w *where) addPath(col, what string, m sluicetype.PathMatch) error {
	path, err := jsonPath(m.Path)
	if err != nil {
		return fmt.Errorf("%w: filter: %s path %q: %v", sluicetype.ErrInvalid, what, m.Path, err)
	}
	var b strings.Builder
	args := []any{path, path, m.Value}
	b.WriteString("(CASE WHEN json_valid(" + col + ") THEN CASE json_type(" + col + ", ?) WHEN 'text' THEN json_extract(" + col + ", ?) = ?")
	switch kind, v := sluicetype.PathValueOf(m.Value); kind {
	case sluicetype.PathValueNumber:
		if n, ok := sqlNumber(v); ok {
			b.WriteString(" WHEN 'integer' THEN json_extract(" + col + ", ?) = ? WHEN 'real' THEN json_extract(" + col + ", ?) = ?")
			args = append(args, path, n, path, n)
		}
	case sluicetype.PathValueLiteral:
		b.WriteString(" WHEN ? THEN 1")
		args = append(args, v)
	case sluicetype.PathValueObject, sluicetype.PathValueArray:
		typ := "object"
		if kind == sluicetype.PathValueArray {
			typ = "array"
		}
		b.WriteString(" WHEN '" + typ + "' THEN " + treeEqual(col))
		args = append(args, path, v)
	}
	b.WriteString(" ELSE 0 END END)")
	w.add(b.String(), args...)
	return nil
}

// treeEqual is the condition that the object or array at a path (the
// first parameter) in col is the JSON value of the second parameter,
// compared as values: json_tree lists both as nodes, and the recursive
// pairing starts from the two roots and pairs a node's children with the
// other's children of the same key (object members by their decoded
// names, array elements by index), the same type (an integer and a real
// are both numbers) and the same atom (a string's contents, a number's
// value). The values are equal when every node of both is paired. The
// keys of an object are unique (the engine refuses a member named twice
// in a payload and treats such a value as text), so a node has at most
// one partner.
func treeEqual(col string) string {
	node := func(src string) string {
		return "SELECT id, parent, key, CASE type WHEN 'integer' THEN 'real' ELSE type END AS t, atom FROM " + src
	}
	return "(WITH RECURSIVE a AS (" + node("json_tree("+col+", ?)") + "), b AS (" + node("json_tree(?)") + "), " +
		"p(aid, bid) AS (SELECT a.id, b.id FROM a, b WHERE a.parent IS NULL AND b.parent IS NULL AND a.t = b.t " +
		"UNION ALL SELECT a.id, b.id FROM p JOIN a ON a.parent = p.aid JOIN b ON b.parent = p.bid AND b.key = a.key AND b.t = a.t AND b.atom IS a.atom) " +
		"SELECT (SELECT count(*) FROM p) = (SELECT count(*) FROM a) AND (SELECT count(*) FROM b) = (SELECT count(*) FROM a))"
}

// jsonPath turns dot-separated keys into a SQLite JSON path with every key
// quoted: a.b becomes $."a"."b". The engine has checked the keys against
// sluicetype.PathKeyPattern; quotes and backslashes, which a quoted key could
// not hold, are refused here as well.
func jsonPath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	var b strings.Builder
	b.WriteByte('$')
	for key := range strings.SplitSeq(p, ".") {
		if key == "" || strings.ContainsAny(key, "\"\\") {
			return "", fmt.Errorf("bad key %q", key)
		}
		b.WriteString(`."`)
		b.WriteString(key)
		b.WriteByte('"')
	}
	return b.String(), nil
}

// sqlNumber is v, a filter value, as the number SQLite compares a JSON
// number with, when v is a JSON number: an integer when it is one, else
// a float.
func sqlNumber(v string) (any, bool) {
	if _, ok := sluicetype.JSONNumber(v); !ok {
		return nil, false
	}
	v = strings.TrimSpace(v)
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}
