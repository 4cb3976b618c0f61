package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// payloadDiff says in a few words what an edit changed: the paths whose
// value changed, was added or was removed, as `a.b: 1 → 2`, `c added`,
// `d removed`, at most maxDiffPaths of them (and how many more). Values
// are shown short; the whole payloads stay on the job (before is gone
// once saved, so the timeline keeps this summary). It returns "" when
// either side is not a JSON object.
func payloadDiff(before, after json.RawMessage) string {
	var a, b map[string]any
	if json.Unmarshal(before, &a) != nil || json.Unmarshal(after, &b) != nil {
		return ""
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	var paths []string
	for p := range fa {
		paths = append(paths, p)
	}
	for p := range fb {
		if _, ok := fa[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var out []string
	more := 0
	for _, p := range paths {
		x, inA := fa[p]
		y, inB := fb[p]
		var s string
		switch {
		case inA && inB && x != y:
			s = fmt.Sprintf("%s: %s → %s", p, x, y)
		case inA && !inB:
			s = p + " removed"
		case !inA && inB:
			s = fmt.Sprintf("%s added: %s", p, y)
		default:
			continue
		}
		if len(out) == maxDiffPaths {
			more++
			continue
		}
		out = append(out, s)
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(out, "; ")
}

// maxDiffPaths is how many changed paths a payload_edited entry names.
const maxDiffPaths = 5

// maxDiffValue is the longest value a diff shows whole.
const maxDiffValue = 40

// flatten writes each leaf of v under its dotted path (arrays whole).
func flatten(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok && (len(m) > 0 || prefix == "") {
		for k, x := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, x, out)
		}
		return
	}
	b, _ := json.Marshal(v)
	s := string(b)
	if r := []rune(s); len(r) > maxDiffValue {
		s = string(r[:maxDiffValue-1]) + "…"
	}
	out[prefix] = s
}

// maxAuditPaths is how many changed paths an audit record names.
const maxAuditPaths = 50

// changedPaths lists the dotted paths an edit changed, added or removed,
// sorted, at most maxAuditPaths: the audit record's "what" of an edit,
// which keeps no value. Nil when either side is not a JSON object.
func changedPaths(before, after json.RawMessage) []string {
	var a, b map[string]any
	if json.Unmarshal(before, &a) != nil || json.Unmarshal(after, &b) != nil {
		return nil
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	var paths []string
	for p, x := range fa {
		if y, ok := fb[p]; !ok || x != y {
			paths = append(paths, p)
		}
	}
	for p := range fb {
		if _, ok := fa[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	if len(paths) > maxAuditPaths {
		paths = paths[:maxAuditPaths]
	}
	return paths
}
