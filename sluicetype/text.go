package sluicetype

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text and JSON every store keeps alike. PostgreSQL's text and jsonb
// refuse NUL and invalid UTF-8 (SQLSTATE 22P05, 22021) where SQLite and
// Redis would keep them, so the engine decides for all of them: text it
// writes itself (error messages, stack traces) is made storable, and JSON
// a caller gives (payloads, metadata, signal payloads, step results) is
// refused with ErrInvalid, since changing it would change the job.

// StorableText is s with each run of invalid UTF-8 bytes and each NUL
// replaced by U+FFFD. A handler's error may hold anything (bytes it read,
// a C string): before this, on PostgreSQL such an error could not be
// recorded at all, and the job sat in running until the reaper charged
// it a crash its process never had.
func StorableText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// jsonHoldsNUL reports whether the JSON text b holds an escaped NUL
// (\u0000) in a string or key: a backslash begins an escape when an even
// number of backslashes precede it.
func jsonHoldsNUL(b []byte) bool {
	for off := 0; ; {
		i := bytes.Index(b[off:], []byte(`\u0000`))
		if i < 0 {
			return false
		}
		i += off
		j := i
		for j > 0 && b[j-1] == '\\' {
			j--
		}
		if (i-j)%2 == 0 {
			return true
		}
		off = i + 1
	}
}

// CheckStorableJSON refuses JSON that a store could not keep as given:
// invalid UTF-8 (which JSON does not allow, though json.Valid passes it),
// a NUL character, or nesting deeper than MaxJSONDepth. what names the
// value in the error.
func CheckStorableJSON(what string, b []byte) error {
	if err := CheckJSONDepth(what, b); err != nil {
		return err
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	}
	if jsonHoldsNUL(b) {
		return fmt.Errorf("%w: %s holds a NUL character (\\u0000), which PostgreSQL cannot store: no store takes it", ErrInvalid, what)
	}
	return nil
}

// NoSuchID is ErrNotFound for an id no job, operation or fingerprint can
// have (invalid UTF-8 or a NUL: every id is checked against its pattern
// when it is made), and nil for any other: such an id is answered without
// asking the store, which on PostgreSQL would refuse the query itself
// and look like an outage.
func NoSuchID(what, id string) error {
	if utf8.ValidString(id) && strings.IndexByte(id, 0) < 0 {
		return nil
	}
	return fmt.Errorf("%s %q: %w", what, id, ErrNotFound)
}
