package api

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Query strings: GET parameters are strict as bodies are — an unknown
// parameter is refused, and every error wraps engine.ErrInvalid.

// listQueryParams are the parameters GET /jobs knows.
var listQueryParams = []string{"state", "queue", "kind", "q", "cursor", "limit"}

// parseListQuery reads GET /jobs's query string: the simple parameters
// (state, queue, kind: comma lists, repeatable) and q (the query grammar)
// AND together.
func parseListQuery(v url.Values) (engine.ListJobsParams, error) {
	if err := knownParams(v, listQueryParams...); err != nil {
		return engine.ListJobsParams{}, err
	}
	var p engine.ListJobsParams
	if q, err := singleParam(v, "q"); err != nil {
		return p, err
	} else if q != "" {
		f, err := engine.ParseQuery(q)
		if err != nil {
			return p, err
		}
		p.Filter = f
	}
	lists := map[string][]string{}
	for _, name := range []string{"state", "queue", "kind"} {
		vs, err := boundedListParam(v, name)
		if err != nil {
			return p, err
		}
		lists[name] = vs
	}
	for _, s := range lists["state"] {
		p.Filter.States = appendNew(p.Filter.States, engine.State(s))
	}
	for _, s := range lists["queue"] {
		p.Filter.Queues = appendNew(p.Filter.Queues, s)
	}
	for _, s := range lists["kind"] {
		p.Filter.Kinds = appendNew(p.Filter.Kinds, s)
	}
	var err error
	if p.Cursor, err = singleParam(v, "cursor"); err != nil {
		return p, err
	}
	if p.Limit, err = intParam(v, "limit"); err != nil {
		return p, err
	}
	if err := p.Filter.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

// parseFilterQuery reads the filter of GET /error-groups: q plus the
// simple parameters, as GET /jobs.
func parseFilterQuery(v url.Values) (engine.Filter, error) {
	if err := knownParams(v, "state", "queue", "kind", "q"); err != nil {
		return engine.Filter{}, err
	}
	p, err := parseListQuery(v)
	return p.Filter, err
}

// parseOperationsQuery reads GET /operations's limit and cursor.
func parseOperationsQuery(v url.Values) (limit int, cursor string, err error) {
	if err := knownParams(v, "limit", "cursor"); err != nil {
		return 0, "", err
	}
	if limit, err = intParam(v, "limit"); err != nil {
		return 0, "", err
	}
	if cursor, err = singleParam(v, "cursor"); err != nil {
		return 0, "", err
	}
	return limit, cursor, nil
}

func knownParams(v url.Values, known ...string) error {
	for k := range v {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%w: unknown query parameter %q (known: %s)", engine.ErrInvalid, k, strings.Join(known, ", "))
		}
	}
	return nil
}

func singleParam(v url.Values, name string) (string, error) {
	vs := v[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", fmt.Errorf("%w: query parameter %s given %d times; it takes one value", engine.ErrInvalid, name, len(vs))
}

// listParam splits every value of a repeatable, comma-separated parameter.
func listParam(v url.Values, name string) []string {
	var out []string
	for _, s := range v[name] {
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// boundedListParam is listParam refusing more than
// engine.MaxFilterValues values before they are gathered, so that a
// query string of thousands costs no more than its refusal.
func boundedListParam(v url.Values, name string) ([]string, error) {
	out := listParam(v, name)
	if len(out) > engine.MaxFilterValues {
		return nil, fmt.Errorf("%w: query parameter %s: %d values; at most %d", engine.ErrInvalid, name, len(out), engine.MaxFilterValues)
	}
	return out, nil
}

func intParam(v url.Values, name string) (int, error) {
	s, err := singleParam(v, name)
	if err != nil || s == "" {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: query parameter %s=%q is not an integer", engine.ErrInvalid, name, s)
	}
	return n, nil
}

func boolParam(v url.Values, name string) (bool, error) {
	s, err := singleParam(v, name)
	if err != nil || s == "" {
		return false, err
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: query parameter %s=%q is not true or false", engine.ErrInvalid, name, s)
	}
	return b, nil
}
