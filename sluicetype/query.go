package sluicetype

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The q grammar: the filter bar of the console, `sluice jobs list -q` and
// `GET /jobs?q=` all write a Filter as whitespace-separated terms
//
//	state:archived,cancelled queue:billing kind:email error:"timeout"
//	payload.customer.id:42 meta.tenant:acme created>24h superseded:include
//
// A value is bare (up to the next white space; for list fields also up to a
// comma) or double-quoted with the escapes \" \\ \n \t \r and \uXXXX (a
// selector writes control and format characters so); no value may hold a
// NUL character (U+0000), which no store keeps. List fields
// (state, queue, kind, id, tag) take several values, as a comma list or by
// repeating the term, and match any of them; every other field takes one
// value. Every term narrows: terms of different fields AND together.
//
// Times (created>, created<, finalized>, finalized<) are RFC 3339
// (2024-05-01T12:00:00Z), a date (2024-05-01, midnight UTC), a duration
// before now: a sequence of <integer><unit> with units s, m, h, d (24h) and
// w (7d), as in 15m, 24h, 7d, 1d12h, or a clock time (07:29, 07:29:06):
// the last time the clock read it, at or before now, in now's time zone
// (ParseQueryAt; the local zone for ParseQuery).

// QueryFields lists the fields the q grammar knows, for help texts and
// error messages.
var QueryFields = []string{
	"state", "queue", "kind", "id", "fingerprint", "unique", "tag", "error", "errgroup",
	"payload.<path>", "meta.<key>",
	"created>", "created<", "finalized>", "finalized<", "expires<",
	"superseded:include",
}

// PathKeyPattern is the rule for each dot-separated key of a payload or
// meta path.
const PathKeyPattern = `^[A-Za-z0-9_-]+$`

var queryPathKeyRE = regexp.MustCompile(PathKeyPattern)

// queryMaxRelative is the longest relative time a query may name.
const queryMaxRelative = 100 * 365 * 24 * time.Hour

// ParseQuery parses the q grammar into a Filter, taking relative times
// against the current time. See ParseQueryAt.
func ParseQuery(q string) (Filter, error) {
	return ParseQueryAt(q, time.Now())
}

// ParseQueryAt parses the q grammar into a Filter, reading relative times
// (created>24h) as that long before now. An empty query is the empty
// Filter. Every error wraps ErrInvalid and names the term that failed.
// Times in the result are in UTC; list values keep their first-seen order
// without repeats.
func ParseQueryAt(q string, now time.Time) (Filter, error) {
	var f Filter
	if err := checkQueryLength(q); err != nil {
		return Filter{}, err
	}
	if !utf8.ValidString(q) {
		return Filter{}, fmt.Errorf("%w: query is not valid UTF-8", ErrInvalid)
	}
	p := queryParser{s: q, now: now}
	seen := map[string]bool{} // single-valued fields already given
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			break
		}
		if err := p.term(&f, seen); err != nil {
			return Filter{}, err
		}
	}
	if len(f.IDs) > MaxApplyIDs {
		return Filter{}, fmt.Errorf("%w: query names %d ids; at most %d", ErrInvalid, len(f.IDs), MaxApplyIDs)
	}
	if err := f.checkBounds(); err != nil {
		return Filter{}, err
	}
	return f, nil
}

type queryParser struct {
	s   string
	i   int
	now time.Time
}

func isQuerySpace(r rune) bool { return unicode.IsSpace(r) }

func (p *queryParser) peekRune() (rune, int) {
	return utf8.DecodeRuneInString(p.s[p.i:])
}

func (p *queryParser) atSpace() bool {
	if p.i >= len(p.s) {
		return false
	}
	r, _ := p.peekRune()
	return isQuerySpace(r)
}

func (p *queryParser) atEnd() bool { return p.i >= len(p.s) || p.atSpace() }

func (p *queryParser) skipSpace() {
	for p.atSpace() {
		_, n := p.peekRune()
		p.i += n
	}
}

// termAt returns the text of the term starting at start, for messages: up
// to the first white space outside quotes, or the end.
func (p *queryParser) termAt(start int) string {
	inQuote := false
	for i := start; i < len(p.s); {
		r, n := utf8.DecodeRuneInString(p.s[i:])
		switch {
		case inQuote && r == '\\':
			n++
		case r == '"':
			inQuote = !inQuote
		case !inQuote && isQuerySpace(r):
			return p.s[start:i]
		}
		i += n
	}
	return p.s[start:]
}

func (p *queryParser) fail(start int, format string, args ...any) error {
	return fmt.Errorf("%w: query term %q: %s", ErrInvalid, p.shortTermAt(start), fmt.Sprintf(format, args...))
}

// shortTermAt is termAt cut to a length fit for a message.
func (p *queryParser) shortTermAt(start int) string {
	term := p.termAt(start)
	if len(term) > 120 {
		term = queryTruncate(term, 117) + "..."
	}
	return term
}

func queryTruncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

type queryFieldKind int

const (
	qfList queryFieldKind = iota
	qfSingle
	qfTime
)

func (p *queryParser) term(f *Filter, seen map[string]bool) error {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == ':' || c == '<' || c == '>' || c == '"' || p.atSpace() {
			break
		}
		_, n := p.peekRune()
		p.i += n
	}
	name := p.s[start:p.i]
	if p.i >= len(p.s) || p.atSpace() || p.s[p.i] == '"' || name == "" {
		return fmt.Errorf("%w: term %q has no field: write field:value", ErrInvalid, p.shortTermAt(start))
	}
	op := p.s[p.i]
	p.i++

	kind := qfSingle
	var path string
	switch {
	case name == "state" || name == "queue" || name == "kind" || name == "id" || name == "tag":
		kind = qfList
	case name == "fingerprint" || name == "unique" || name == "error" || name == "errgroup" || name == "superseded":
	case name == "created" || name == "finalized":
		kind = qfTime
	case name == "expires":
		if op != '<' {
			return p.fail(start, "expires takes <, as in expires<24h (the jobs retention deletes within 24h)")
		}
		kind = qfSingle
	case strings.HasPrefix(name, "payload.") || strings.HasPrefix(name, "meta."):
		_, path, _ = strings.Cut(name, ".")
		if err := checkQueryPath(path); err != nil {
			return p.fail(start, "%s %v", name[:strings.IndexByte(name, '.')], err)
		}
	case name == "payload" || name == "meta":
		return p.fail(start, "%s needs a path: write %s.<path>:value", name, name)
	default:
		return p.fail(start, "unknown field %q; known fields: %s", name, strings.Join(QueryFields, ", "))
	}
	if name == "expires" {
		// checked above
	} else if kind == qfTime {
		if op != '<' && op != '>' {
			return p.fail(start, "%s takes > or <, as in %s>24h or %s<2024-05-01T00:00:00Z", name, name, name)
		}
	} else if op != ':' {
		return p.fail(start, "%s takes ':', as in %s:value", name, name)
	}

	vals, err := p.values(start, kind == qfList)
	if err != nil {
		return err
	}

	key := name
	if kind == qfTime {
		key += string(op)
	}
	if kind != qfList && path == "" {
		if seen[key] {
			return p.fail(start, "%s is given twice; it takes one value", key)
		}
		seen[key] = true
	}
	v := vals[0]

	switch name {
	case "state":
		for _, v := range vals {
			if err := queryCheckState(State(v)); err != nil {
				return p.fail(start, "%v", err)
			}
			f.States = queryAppendNew(f.States, State(v))
		}
	case "queue", "kind", "tag":
		for _, v := range vals {
			if !namePattern.MatchString(v) {
				return p.fail(start, "%s name %q does not match %s", name, v, NamePattern)
			}
		}
		switch name {
		case "queue":
			f.Queues = queryAppendAllNew(f.Queues, vals)
		case "kind":
			f.Kinds = queryAppendAllNew(f.Kinds, vals)
		default:
			f.Tags = queryAppendAllNew(f.Tags, vals)
		}
	case "id":
		f.IDs = queryAppendAllNew(f.IDs, vals)
	case "fingerprint":
		v = strings.ToLower(v)
		if err := queryCheckFingerprint(v); err != nil {
			return p.fail(start, "%v", err)
		}
		f.Fingerprint = v
	case "unique":
		v = strings.ToLower(v)
		if err := queryCheckUniqueKey(v); err != nil {
			return p.fail(start, "%v", err)
		}
		f.UniqueKey = v
	case "error":
		f.Error = v
	case "errgroup":
		f.ErrorPattern = v
	case "superseded":
		if v != "include" {
			return p.fail(start, "superseded takes only the value include (superseded:include)")
		}
		f.IncludeSuperseded = true
	case "expires":
		d, err := parseQueryDuration(v)
		if err != nil || d <= 0 {
			if err == nil {
				err = fmt.Errorf("expires<%s: want a duration longer than 0, as 24h or 2d", v)
			}
			return p.fail(start, "%v", err)
		}
		f.ExpiresWithin = &d
	case "created", "finalized":
		t, err := parseQueryTime(v, p.now)
		if err != nil {
			return p.fail(start, "%v", err)
		}
		switch key {
		case "created>":
			f.CreatedAfter = &t
		case "created<":
			f.CreatedBefore = &t
		case "finalized>":
			f.FinalizedAfter = &t
		default:
			f.FinalizedBefore = &t
		}
	default: // payload.<path>, meta.<key>
		m := PathMatch{Path: path, Value: v}
		if strings.HasPrefix(name, "payload.") {
			f.Payload = append(f.Payload, m)
		} else {
			f.Meta = append(f.Meta, m)
		}
	}
	return nil
}

// values reads a term's value: one, or for list fields a comma list.
func (p *queryParser) values(start int, list bool) ([]string, error) {
	var out []string
	for {
		var v string
		if p.i < len(p.s) && p.s[p.i] == '"' {
			q, err := p.quoted(start)
			if err != nil {
				return nil, err
			}
			v = q
		} else {
			b := p.i
			for p.i < len(p.s) && !p.atSpace() {
				c := p.s[p.i]
				if list && c == ',' {
					break
				}
				if c == '"' {
					return nil, p.fail(start, `a quote may only open a value: quote the whole value, as in field:"two words"`)
				}
				_, n := p.peekRune()
				p.i += n
			}
			v = p.s[b:p.i]
		}
		if v == "" {
			return nil, p.fail(start, "empty value")
		}
		// Refused here as Filter.Validate refuses it: no store keeps a
		// NUL (PostgreSQL refuses the query), so such a value could match
		// nothing. Other control characters are kept: an error message
		// may hold them, and Validate takes them.
		if i := strings.IndexByte(v, 0); i >= 0 {
			return nil, p.fail(start, "the value holds a NUL character (U+0000) at byte %d; no store keeps one, so remove it", i)
		}
		out = append(out, v)
		if p.atEnd() {
			return out, nil
		}
		if list && p.s[p.i] == ',' {
			p.i++
			continue
		}
		r, _ := p.peekRune()
		return nil, p.fail(start, "unexpected %q after a quoted value", r)
	}
}

// quoted reads a double-quoted value with its escapes.
func (p *queryParser) quoted(start int) (string, error) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case '"':
			p.i++
			return b.String(), nil
		case '\\':
			if p.i+1 >= len(p.s) {
				return "", p.fail(start, "unterminated quote")
			}
			switch e := p.s[p.i+1]; e {
			case '"', '\\':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'u':
				// \uXXXX: how a selector writes the characters a
				// terminal would act on (quoteQueryValue), and how the
				// command line spells them, so a printed query pastes.
				v, err := strconv.ParseUint(p.s[p.i+2:min(p.i+6, len(p.s))], 16, 32)
				if err != nil || p.i+6 > len(p.s) || utf16.IsSurrogate(rune(v)) {
					return "", p.fail(start, `\u takes four hex digits of a character that is not a surrogate, as in \u001b`)
				}
				b.WriteRune(rune(v))
				p.i += 6
				continue
			default:
				r, _ := utf8.DecodeRuneInString(p.s[p.i+1:])
				return "", p.fail(start, `unknown escape \%c in a quoted value: only \" \\ \n \t \r \uXXXX`, r)
			}
			p.i += 2
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return "", p.fail(start, "unterminated quote")
}

func queryAppendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func queryAppendAllNew(s, vs []string) []string {
	for _, v := range vs {
		s = queryAppendNew(s, v)
	}
	return s
}

func queryStateNames() string {
	names := make([]string, len(AllStates))
	for i, s := range AllStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func queryCheckState(s State) error {
	if !s.Valid() {
		return fmt.Errorf("unknown state %q; valid states: %s", s, queryStateNames())
	}
	return nil
}

// queryCheckUniqueKey accepts a unique key as UniqueKeyOf writes it: 32
// lower-case hex characters.
func queryCheckUniqueKey(k string) error {
	if len(k) != 32 || strings.Trim(k, "0123456789abcdef") != "" {
		return fmt.Errorf("unique key %q is not 32 lower-case hex characters", k)
	}
	return nil
}

func queryCheckFingerprint(fp string) error {
	if len(fp) != 64 {
		return fmt.Errorf("fingerprint %q is not 64 lower-case hex characters (it has %d characters)", fp, utf8.RuneCountInString(fp))
	}
	for i := 0; i < len(fp); i++ {
		c := fp[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("fingerprint %q is not 64 lower-case hex characters", fp)
		}
	}
	return nil
}

func checkQueryPath(path string) error {
	if path == "" {
		return errors.New("path is empty: write the path's keys separated by dots, as in payload.customer.id:42")
	}
	for key := range strings.SplitSeq(path, ".") {
		if !queryPathKeyRE.MatchString(key) {
			return fmt.Errorf("path %q: key %q does not match %s", path, key, PathKeyPattern)
		}
	}
	return nil
}

var queryRelativeRE = regexp.MustCompile(`^(?:[0-9]+[smhdw])+$`)
var queryRelativePartRE = regexp.MustCompile(`([0-9]+)([smhdw])`)

var queryRelativeUnits = map[byte]time.Duration{
	's': time.Second, 'm': time.Minute, 'h': time.Hour,
	'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour,
}

// parseQueryTime reads an RFC 3339 time, a date, or a duration before now.
func parseQueryTime(v string, now time.Time) (time.Time, error) {
	var t time.Time
	if c, ok, err := parseClockTime(v, now); ok || err != nil {
		if err != nil {
			return time.Time{}, err
		}
		return c.UTC(), nil
	}
	switch {
	case queryRelativeRE.MatchString(v):
		total, err := parseQueryDuration(v)
		if err != nil {
			return time.Time{}, err
		}
		t = now.Add(-total)
	default:
		var err error
		t, err = time.Parse(time.RFC3339, v)
		if err != nil {
			t, err = time.Parse(time.DateOnly, v)
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q is neither RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01), a duration before now (15m, 24h, 7d) nor a clock time (07:29, 07:29:06)", v)
		}
	}
	t = t.UTC() // drops the monotonic reading too
	if err := CheckQueryTime(t); err != nil {
		return time.Time{}, err
	}
	return t, nil
}

// parseQueryDuration reads a relative duration: <integer><unit>... with
// units s, m, h, d and w, at most queryMaxRelative.
func parseQueryDuration(v string) (time.Duration, error) {
	if !queryRelativeRE.MatchString(v) {
		return 0, fmt.Errorf("duration %q: want <integer><unit>... with units s, m, h, d, w, as 15m, 24h, 7d", v)
	}
	var total time.Duration
	for _, m := range queryRelativePartRE.FindAllStringSubmatch(v, -1) {
		n, err := strconv.ParseInt(m[1], 10, 64)
		unit := queryRelativeUnits[m[2][0]]
		if err != nil || n > int64(queryMaxRelative/unit) {
			return 0, fmt.Errorf("duration %q is longer than %dd", v, queryMaxRelative/(24*time.Hour))
		}
		total += time.Duration(n) * unit
		if total > queryMaxRelative {
			return 0, fmt.Errorf("duration %q is longer than %dd", v, queryMaxRelative/(24*time.Hour))
		}
	}
	return total, nil
}

// formatQueryDuration writes d as parseQueryDuration reads it back.
func formatQueryDuration(d time.Duration) string {
	// Whole seconds are the grammar's finest unit: a part of one counts
	// as one.
	d = (d + time.Second - 1) / time.Second * time.Second
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		c byte
		d time.Duration
	}{{'d', 24 * time.Hour}, {'h', time.Hour}, {'m', time.Minute}, {'s', time.Second}} {
		if n := d / u.d; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteByte(u.c)
			d -= n * u.d
		}
	}
	return b.String()
}

var queryClockRE = regexp.MustCompile(`^([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?$`)

// parseClockTime reads a clock time, 07:29 or 07:29:06, as the last time
// the clock read it at or before now, in now's zone: "finalized<07:29"
// typed at 07:40 is today's 07:29, typed at 00:10 it is yesterday's. ok
// is false when v is not a clock time at all.
func parseClockTime(v string, now time.Time) (t time.Time, ok bool, err error) {
	m := queryClockRE.FindStringSubmatch(v)
	if m == nil {
		return time.Time{}, false, nil
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	sec := 0
	if m[3] != "" {
		sec, _ = strconv.Atoi(m[3])
	}
	if h > 23 || mi > 59 || sec > 59 {
		return time.Time{}, true, fmt.Errorf("clock time %q is not a time of day (00:00 to 23:59:59)", v)
	}
	y, mo, d := now.Date()
	t = time.Date(y, mo, d, h, mi, sec, 0, now.Location())
	if t.After(now) {
		t = time.Date(y, mo, d-1, h, mi, sec, 0, now.Location())
	}
	return t, true, nil
}

func CheckQueryTime(t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("time %s is outside the years 0000-9999", t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// String writes f in the q grammar; ParseQuery reads it back to an equal
// Filter (times compared as instants; ParseQuery returns them in UTC).
func (f Filter) String() string {
	var terms []string
	list := func(field string, vs []string) {
		if len(vs) == 0 {
			return
		}
		q := make([]string, len(vs))
		for i, v := range vs {
			q[i] = quoteQueryValue(v, true)
		}
		terms = append(terms, field+":"+strings.Join(q, ","))
	}
	single := func(field, v string) {
		if v != "" {
			terms = append(terms, field+":"+quoteQueryValue(v, false))
		}
	}
	at := func(field string, t *time.Time) {
		if t != nil {
			terms = append(terms, field+t.UTC().Format(time.RFC3339Nano))
		}
	}
	states := make([]string, len(f.States))
	for i, s := range f.States {
		states[i] = string(s)
	}
	list("state", states)
	list("queue", f.Queues)
	list("kind", f.Kinds)
	list("id", f.IDs)
	single("fingerprint", f.Fingerprint)
	single("unique", f.UniqueKey)
	list("tag", f.Tags)
	single("error", f.Error)
	single("errgroup", f.ErrorPattern)
	for _, m := range f.Payload {
		terms = append(terms, "payload."+m.Path+":"+quoteQueryValue(m.Value, false))
	}
	for _, m := range f.Meta {
		terms = append(terms, "meta."+m.Path+":"+quoteQueryValue(m.Value, false))
	}
	at("created>", f.CreatedAfter)
	at("created<", f.CreatedBefore)
	at("finalized>", f.FinalizedAfter)
	at("finalized<", f.FinalizedBefore)
	if f.ExpiresWithin != nil {
		terms = append(terms, "expires<"+formatQueryDuration(*f.ExpiresWithin))
	}
	if f.IncludeSuperseded {
		terms = append(terms, "superseded:include")
	}
	return strings.Join(terms, " ")
}

// quoteQueryValue writes v bare when the grammar reads it back unchanged,
// else double-quoted.
func quoteQueryValue(v string, list bool) string {
	need := v == "" || strings.ContainsAny(v, `"\`) || strings.ContainsFunc(v, isQuerySpace) ||
		(list && strings.Contains(v, ",")) || strings.ContainsFunc(v, queryEscaped)
	if !need {
		return v
	}
	var b strings.Builder
	b.Grow(len(v) + 2)
	b.WriteByte('"')
	for i := 0; i < len(v); {
		r, n := utf8.DecodeRuneInString(v[i:])
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == utf8.RuneError && n <= 1:
			b.WriteByte(v[i])
		case queryEscaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(v[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}

// queryEscaped reports the runes a selector writes as \uXXXX: those the
// command line and the console never send to a terminal as they are
// (internal/termtext: C0 and C1 controls, DEL, line and paragraph
// separators, format and private-use characters but the zero-width
// joiner). Written so, the selector reads the same on the screen as in
// the grammar, and a query copied from the screen pastes.
func queryEscaped(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case r < 0xa0 || r == 0x200d:
		return false
	}
	return r == 0x2028 || r == 0x2029 || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r)
}

// IsEmpty reports whether no field of f narrows the jobs it matches.
// IncludeSuperseded widens rather than narrows, so alone it is empty.
func (f Filter) IsEmpty() bool {
	return len(f.States) == 0 && len(f.Queues) == 0 && len(f.Kinds) == 0 &&
		len(f.IDs) == 0 && f.Fingerprint == "" && f.UniqueKey == "" && len(f.Tags) == 0 &&
		f.Error == "" && f.ErrorPattern == "" && len(f.Payload) == 0 && len(f.Meta) == 0 &&
		f.CreatedAfter == nil && f.CreatedBefore == nil &&
		f.FinalizedAfter == nil && f.FinalizedBefore == nil && f.ExpiresWithin == nil
}

// Validate checks f against the documented rules: known states, queue,
// kind and tag names matching NamePattern, at most MaxApplyIDs non-empty
// ids, a 64-character lower-case hex fingerprint, payload and meta paths
// of dot-separated keys matching PathKeyPattern, times in the years
// 0000-9999, and the bounds of filterbounds.go (MaxFilterValues,
// MaxFilterPaths, MaxFilterText). The error wraps ErrInvalid.
func (f Filter) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: filter: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if err := f.checkBounds(); err != nil {
		return err
	}
	for _, s := range f.States {
		if err := queryCheckState(s); err != nil {
			return bad("%v", err)
		}
	}
	names := []struct {
		what string
		vs   []string
	}{{"queue", f.Queues}, {"kind", f.Kinds}, {"tag", f.Tags}}
	for _, n := range names {
		for _, v := range n.vs {
			if !namePattern.MatchString(v) {
				return bad("%s name %q does not match %s", n.what, v, NamePattern)
			}
		}
	}
	if len(f.IDs) > MaxApplyIDs {
		return bad("%d ids; at most %d", len(f.IDs), MaxApplyIDs)
	}
	if slices.Contains(f.IDs, "") {
		return bad("empty id")
	}
	// Text no store keeps can match nothing; refused, since PostgreSQL
	// would refuse the query itself (text.go).
	texts := []struct{ what, v string }{{"error", f.Error}, {"error pattern", f.ErrorPattern}}
	for _, id := range f.IDs {
		texts = append(texts, struct{ what, v string }{"id", id})
	}
	for _, m := range f.Payload {
		texts = append(texts, struct{ what, v string }{"payload value", m.Value})
	}
	for _, m := range f.Meta {
		texts = append(texts, struct{ what, v string }{"meta value", m.Value})
	}
	for _, t := range texts {
		if StorableText(t.v) != t.v {
			return bad("%s %q is not valid UTF-8 or holds a NUL character", t.what, t.v)
		}
	}
	if f.Fingerprint != "" {
		if err := queryCheckFingerprint(f.Fingerprint); err != nil {
			return bad("%v", err)
		}
	}
	if d := f.ExpiresWithin; d != nil && (*d <= 0 || *d > queryMaxRelative) {
		return bad("expires within %v: want more than 0 and at most %dd", *d, queryMaxRelative/(24*time.Hour))
	}
	if f.UniqueKey != "" {
		if err := queryCheckUniqueKey(f.UniqueKey); err != nil {
			return bad("%v", err)
		}
	}
	for _, ms := range []struct {
		what string
		ms   []PathMatch
	}{{"payload", f.Payload}, {"meta", f.Meta}} {
		for _, m := range ms.ms {
			if err := checkQueryPath(m.Path); err != nil {
				return bad("%s %v", ms.what, err)
			}
		}
	}
	if f.PlanCutoff != nil {
		return bad("plan_cutoff is the engine's own; pass a dry run's plan instead")
	}
	for _, t := range []*time.Time{f.CreatedAfter, f.CreatedBefore, f.FinalizedAfter, f.FinalizedBefore} {
		if t != nil {
			if err := CheckQueryTime(*t); err != nil {
				return bad("%v", err)
			}
		}
	}
	return nil
}
