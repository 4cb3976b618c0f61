package sluicetype

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxNormalizedError is the most runes NormalizeError returns.
const MaxNormalizedError = 200

// NormalizeError masks the parts of an error message that vary from job to
// job, so the dead jobs that failed the same way group together:
//
//	dial tcp 10.0.0.12:5432: connection refused → dial tcp <addr>: connection refused
//	invalid currency "EURO"                     → invalid currency "<str>"
//	user 3f2b…-…-… not found after 30s          → user <uuid> not found after <n>
//
// It keeps the first non-blank line, collapses white space, and masks, in
// this order (so that an earlier, wider mask is not broken up by a later
// one): URLs → <url>, e-mail addresses → <email>, UUIDs → <uuid>,
// timestamps (2024-05-01T12:00:00Z, 2024-05-01) → <time>, IPv4 and IPv6
// addresses with an optional port → <addr>, double-quoted strings →
// "<str>" (a quoted string that is just one of the masks above keeps it,
// and one that names a column, table, constraint, field and the like is
// kept: see normNameNouns), ids of any alphabet → <id> and 0x… literals →
// <hex> (see normMaskIDs for what reads as an id), numbers (integers,
// decimals, exponents, durations such as 30s, 1.5ms, 1h30m, and sizes such
// as 10MB) → <n>. Digits glued to the end of a word (sha256, x509, int64,
// v1.2) are part of a name and kept.
// The result is cut to MaxNormalizedError runes, at a space when it can.
func NormalizeError(msg string) string {
	s := strings.ToValidUTF8(msg, "\uFFFD")
	s = normFirstLine(s)
	s = strings.Join(strings.Fields(s), " ")

	s = normURLRE.ReplaceAllStringFunc(s, normMaskURL)
	s = normEmailRE.ReplaceAllString(s, "<email>")
	s = normReplaceBounded(s, normUUIDRE, "<uuid>")
	s = normReplaceBounded(s, normTimeRE, "<time>")
	s = normBracketV6RE.ReplaceAllStringFunc(s, normMaskBracketV6)
	s = normMaskBareIPv6(s)
	s = normMaskIPv4(s)
	s = normMaskQuotedAll(s)
	s = normMaskBase64(s)
	s = normMaskIDs(s)
	s = normMaskNumbers(s)

	return normCap(s)
}

// normCap cuts s to MaxNormalizedError runes, at the last space that fits
// when there is one, so that no word or mask is cut in half.
func normCap(s string) string {
	if utf8.RuneCountInString(s) <= MaxNormalizedError {
		return s
	}
	r := []rune(s)
	cut := string(r[:MaxNormalizedError])
	if r[MaxNormalizedError] == ' ' {
		return strings.TrimRight(cut, " ")
	}
	if k := strings.LastIndexByte(cut, ' '); k > 0 {
		return strings.TrimRight(cut[:k], " ")
	}
	return cut
}

// normFirstLine returns the first line that is not blank.
func normFirstLine(s string) string {
	for line := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if strings.TrimSpace(line) != "" {
			return line
		}
	}
	return ""
}

var (
	normURLRE       = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)
	normEmailRE     = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)
	normUUIDRE      = regexp.MustCompile(`[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}`)
	normTimeRE      = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?`)
	normBracketV6RE = regexp.MustCompile(`\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?\](?::[0-9]{1,5})?`)
	normV6RunRE     = regexp.MustCompile(`[0-9A-Fa-f:.]+`)
	normIPv4RE      = regexp.MustCompile(`[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?::[0-9]{1,5})?`)
	normZoneRE      = regexp.MustCompile(`^%[A-Za-z0-9_.-]+`)
	normQuotedRE    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	normBase64RE    = regexp.MustCompile(`[A-Za-z0-9+/]{20,}={0,2}`)
)

func normIsAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func normIsLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func normIsDigit(c byte) bool { return '0' <= c && c <= '9' }

func normIsHexDigit(c byte) bool {
	return normIsDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// normBounded reports whether s[i:j] stands on its own: no letter, digit
// or mask just before or just after it (masks count as words, so that
// normalising twice changes nothing more).
func normBounded(s string, i, j int) bool {
	return normLeftBounded(s, i) && normRightBounded(s, j)
}

func normLeftBounded(s string, i int) bool {
	if i == 0 {
		return true
	}
	if normIsAlnum(s[i-1]) {
		return false
	}
	if s[i-1] == '>' {
		for _, m := range normMasks {
			if strings.HasSuffix(s[:i], m) {
				return false
			}
		}
	}
	return true
}

func normRightBounded(s string, j int) bool {
	if j == len(s) {
		return true
	}
	if normIsAlnum(s[j]) {
		return false
	}
	if s[j] == '<' {
		for _, m := range normMasks {
			if strings.HasPrefix(s[j:], m) {
				return false
			}
		}
	}
	return true
}

// normReplaceBounded replaces the matches of re that stand on their own.
func normReplaceBounded(s string, re *regexp.Regexp, mask string) string {
	locs := re.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, l := range locs {
		if !normBounded(s, l[0], l[1]) {
			continue
		}
		b.WriteString(s[last:l[0]])
		b.WriteString(mask)
		last = l[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// normMaskURL masks a URL, leaving the punctuation that ends a sentence or
// closes a bracket after it.
func normMaskURL(u string) string {
	trimmed := strings.TrimRight(u, ".,;:!?)]}")
	return "<url>" + u[len(trimmed):]
}

func normMaskBracketV6(m string) string {
	end := strings.IndexByte(m, ']')
	host := m[1:end]
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
		return m
	}
	return "<addr>"
}

// normMaskBareIPv6 masks IPv6 addresses written without brackets (::1,
// fe80::1%eth0, 2001:db8::8a2e:370:7334). Candidates are runs of hex
// digits, colons and dots with two colons or more, confirmed by
// netip.ParseAddr, less any colons or dots that end a sentence; a bare
// "::" is punctuation, not an address.
func normMaskBareIPv6(s string) string {
	locs := normV6RunRE.FindAllStringIndex(s, -1)
	var b strings.Builder
	last := 0
	for _, l := range locs {
		i, j := l[0], l[1]
		if i < last || strings.Count(s[i:j], ":") < 2 { // i < last: inside a zone already masked
			continue
		}
		for ; j > i; j-- {
			if a, err := netip.ParseAddr(s[i:j]); err == nil && a.Is6() {
				break
			}
			if c := s[j-1]; c != ':' && c != '.' {
				j = i
				break
			}
		}
		if j == i || !normBounded(s, i, j) || !strings.ContainsFunc(s[i:j], func(r rune) bool { return r < 0x80 && normIsHexDigit(byte(r)) }) {
			continue
		}
		if z := normZoneRE.FindString(s[j:]); z != "" {
			j += len(z)
		}
		b.WriteString(s[last:i])
		b.WriteString("<addr>")
		last = j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// normMaskIPv4 masks dotted quads with an optional port. A quad inside a
// longer dotted run (1.2.3.4.5, a version) is left to the number mask.
func normMaskIPv4(s string) string {
	locs := normIPv4RE.FindAllStringIndex(s, -1)
	var b strings.Builder
	last := 0
	for _, l := range locs {
		i, j := l[0], l[1]
		if !normLeftBounded(s, i) || i > 0 && s[i-1] == '.' {
			continue
		}
		if !normRightBounded(s, j) || j+1 < len(s) && s[j] == '.' && normIsDigit(s[j+1]) {
			continue
		}
		host := s[i:j]
		if k := strings.IndexByte(host, ':'); k >= 0 {
			host = host[:k]
		}
		if _, err := netip.ParseAddr(host); err != nil {
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString("<addr>")
		last = j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

var normMasks = []string{"<url>", "<email>", "<uuid>", "<time>", "<addr>", "<id>", "<hex>", "<n>"}

// normNameNouns are the words after which a quoted string names a part of
// the program or its schema (column "email", constraint "users_pkey",
// field "amount") rather than carrying a value: each such name is a
// different fault, so it is kept, and only its ids and numbers are masked.
var normNameNouns = []string{
	"column", "relation", "table", "constraint", "index", "schema", "database",
	"role", "function", "type", "field", "sequence", "view", "trigger", "extension",
}

// normMaskQuotedAll masks the double-quoted strings of s, keeping those that
// follow one of normNameNouns.
func normMaskQuotedAll(s string) string {
	locs := normQuotedRE.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, l := range locs {
		q := s[l[0]:l[1]]
		if normAfterNameNoun(s[:l[0]]) {
			continue
		}
		b.WriteString(s[last:l[0]])
		b.WriteString(normMaskQuoted(q))
		last = l[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// normAfterNameNoun reports whether before ends with one of normNameNouns
// and a space.
func normAfterNameNoun(before string) bool {
	before, ok := strings.CutSuffix(before, " ")
	if !ok {
		return false
	}
	k := len(before)
	for k > 0 && normIsLetter(before[k-1]) {
		k--
	}
	word := strings.ToLower(before[k:])
	return slices.Contains(normNameNouns, word)
}

func normMaskQuoted(q string) string {
	for _, m := range normMasks {
		if q[1:len(q)-1] == m {
			return q
		}
	}
	return `"<str>"`
}

// normMaskBase64 masks base64 runs of 20 characters or more that mix upper
// case, lower case and digits (a cloud SDK's host or request id), which + and
// / would otherwise cut into words too short to read as ids.
func normMaskBase64(s string) string {
	locs := normBase64RE.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, l := range locs {
		w := s[l[0]:l[1]]
		if !normBounded(s, l[0], l[1]) ||
			!strings.ContainsAny(w, "0123456789") || !strings.ContainsFunc(w, func(r rune) bool { return 'a' <= r && r <= 'z' }) ||
			!strings.ContainsFunc(w, func(r rune) bool { return 'A' <= r && r <= 'Z' }) {
			continue
		}
		b.WriteString(s[last:l[0]])
		b.WriteString("<id>")
		last = l[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// normMaskIDs masks each word of ASCII letters and digits that is an id: a
// 0x literal becomes <hex>, any other id <id>. A word is an id, whatever its
// letters, when
//
//   - it is 8 or more hex digits (a3f9c2e1, aabdbebe, 36652661, 2e549381:
//     a random hex id is all letters, or reads as a number, often enough
//     to matter over thousands of jobs);
//   - it mixes letters and digits and is 8 or more long (base32, base36 and
//     base62 ids, ULIDs, NffrFeUfNV2Hib), or 5 to 7 long with two runs of
//     digits or more (x2x9k, a pod's suffix) — a name carries one run
//     (sha256, x509, int64, ed25519) and is kept;
//   - it is 8 or more letters glued by _ to a prefix of letters (req_,
//     cus_, pi_) and reads as random: upper and lower case mixed after its
//     first letter, or under a quarter of its letters vowels (a, e, i, o,
//     u, y); an English word after a prefix (user_preferences) is kept;
//   - it is 12 or more letters and under a fifth of them are vowels (an
//     all-letter base32 id).
//
// Any other word that starts with a digit and is wholly a number (1h30m,
// 2.5e10) is left to the number mask. Words under these lengths stay as they are, so
// short words that differ by a letter (decade, facade) keep their groups
// apart; over-masking a word that never varies costs nothing, while a
// missed id splits a group per job, so the rules lean towards masking.
func normMaskIDs(s string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); {
		if !normIsAlnum(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && normIsAlnum(s[j]) {
			j++
		}
		w := s[i:j]
		mask := ""
		if i == 0 || s[i-1] != '<' || j == len(s) || s[j] != '>' { // not a mask's own name
			mask = normIDMask(s, i, j)
		}
		if mask != "" {
			b.WriteString(mask)
			changed = true
		} else {
			b.WriteString(w)
		}
		i = j
	}
	if !changed {
		return s
	}
	return b.String()
}

// normIDMask returns the mask for the word s[i:j], or "" when it is no id.
func normIDMask(s string, i, j int) string {
	w := s[i:j]
	if len(w) > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'X') {
		for k := 2; k < len(w); k++ {
			if !normIsHexDigit(w[k]) {
				return ""
			}
		}
		return "<hex>"
	}
	var letters, vowels, digitRuns int
	hex, upper, lower := true, false, false
	for k := 0; k < len(w); k++ {
		c := w[k]
		hex = hex && normIsHexDigit(c)
		if normIsDigit(c) {
			if k == 0 || !normIsDigit(w[k-1]) {
				digitRuns++
			}
			continue
		}
		letters++
		if strings.IndexByte("aeiouyAEIOUY", c) >= 0 {
			vowels++
		}
		if k > 0 {
			upper = upper || 'A' <= c && c <= 'Z'
			lower = lower || 'a' <= c && c <= 'z'
		}
	}
	if len(w) >= 8 && hex {
		// Before the number test: 2e549381 and 5d381234 are hex ids, not
		// an exponent or a chain of days.
		return "<id>"
	}
	if normIsDigit(w[0]) && letters > 0 && normScanNumber(s, i) >= j {
		return "" // a number with its unit: 30s, 1h30m
	}
	switch {
	case letters > 0 && digitRuns > 0 && (len(w) >= 8 || len(w) >= 5 && digitRuns >= 2):
		return "<id>"
	case digitRuns == 0 && len(w) >= 8 && normPrefixed(s, i) && (upper && lower || 4*vowels < letters):
		return "<id>"
	case digitRuns == 0 && len(w) >= 12 && 5*vowels < letters:
		return "<id>"
	}
	return ""
}

// normPrefixed reports whether the word at s[i] is glued by _ to a word of
// letters before it (req_, cus_).
func normPrefixed(s string, i int) bool {
	if i < 2 || s[i-1] != '_' || !normIsLetter(s[i-2]) {
		return false
	}
	return true
}

// normUnits are the suffixes a number may carry and still be one number:
// durations and sizes, longest first where one is a prefix of another.
var normUnits = []string{
	"ns", "us", "µs", "μs", "ms", "s", "m", "h", "d",
	"KiB", "MiB", "GiB", "TiB", "KB", "kB", "MB", "GB", "TB", "B",
}

// normMaskNumbers masks numbers with their unit. A digit right after a letter
// starts no number: it belongs to a name (sha256, v1.2.3), kept whole.
func normMaskNumbers(s string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); {
		c := s[i]
		if !normIsDigit(c) {
			b.WriteByte(c)
			i++
			continue
		}
		if i > 0 && (normIsLetter(s[i-1]) || !normLeftBounded(s, i)) {
			j := i
			for j < len(s) && (normIsAlnum(s[j]) || s[j] == '.' && j+1 < len(s) && normIsDigit(s[j+1])) {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		i = normScanNumber(s, i)
		b.WriteString("<n>")
		changed = true
	}
	if !changed {
		return s
	}
	return b.String()
}

// normScanNumber returns the end of the number starting at s[i], a digit:
// digits, dotted groups of digits, an exponent, and a chain of units (1h30m)
// when the last unit is not followed by a letter.
func normScanNumber(s string, i int) int {
	digits := func(i int) int {
		for i < len(s) && normIsDigit(s[i]) {
			i++
		}
		return i
	}
	plain := func(i int) int {
		i = digits(i)
		for i+1 < len(s) && s[i] == '.' && normIsDigit(s[i+1]) {
			i = digits(i + 1)
		}
		if i+1 < len(s) && (s[i] == 'e' || s[i] == 'E') {
			k := i + 1
			if k+1 < len(s) && (s[k] == '+' || s[k] == '-') {
				k++
			}
			if normIsDigit(s[k]) {
				if e := digits(k); e == len(s) || !normIsLetter(s[e]) {
					i = e
				}
			}
		}
		return i
	}
	end := plain(i)
	// A chain of units and numbers (30s, 1.5ms, 1h30m, 10MB), taken only
	// when it is not followed by more letters (5min stays <n>min).
	for j := end; ; {
		u := normUnitAt(s, j)
		if u == 0 {
			break
		}
		k := j + u
		if k == len(s) || !normIsAlnum(s[k]) {
			end = k
			break
		}
		if !normIsDigit(s[k]) {
			break
		}
		j = plain(k)
		if j == len(s) || !normIsAlnum(s[j]) {
			end = j
			break
		}
	}
	return end
}

// normUnitAt returns the length of the unit at s[i:], or 0.
func normUnitAt(s string, i int) int {
	for _, u := range normUnits {
		if strings.HasPrefix(s[i:], u) {
			return len(u)
		}
	}
	return 0
}
