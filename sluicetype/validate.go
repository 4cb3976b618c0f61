package sluicetype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
)

func ValidateName(what, s string) error {
	if !namePattern.MatchString(s) {
		return fmt.Errorf("%w: %s name %q does not match %s", ErrInvalid, what, s, NamePattern)
	}
	return nil
}

// ValidateJobID checks a caller-given job id.
func ValidateJobID(id string) error {
	if id == ReservedID || !idPattern.MatchString(id) {
		return fmt.Errorf("%w: job id %q does not match %s (and %q is reserved)", ErrInvalid, id, IDPattern, ReservedID)
	}
	return nil
}

// ValidatePayload checks that raw is a JSON object within limit bytes and
// returns its compact form.
func ValidatePayload(raw []byte, limit int) (json.RawMessage, error) {
	if len(raw) > limit {
		return nil, fmt.Errorf("%w: %w: %d bytes, limit %d", ErrInvalid, ErrPayloadTooLarge, len(raw), limit)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: payload must be a JSON object", ErrInvalid)
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("%w: payload is not valid JSON", ErrInvalid)
	}
	if err := CheckStorableJSON("payload", trimmed); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, fmt.Errorf("%w: payload is not valid JSON: %v", ErrInvalid, err)
	}
	return buf.Bytes(), nil
}

// namePattern is the documented rule for queue and kind names.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// idPattern is the documented rule for caller-given job ids.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:~@+-]{0,254}$`)

// NamePattern and IDPattern are the documented rules, for error messages
// and help texts.
const (
	NamePattern = `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`
	IDPattern   = `^[A-Za-z0-9][A-Za-z0-9._:~@+-]{0,254}$`
)

// ReservedID can never be a job id: it names the counts route.
const ReservedID = "counts"

// ValidateJSON checks that raw is one JSON value no deeper than
// MaxJSONDepth and returns it compacted.
func ValidateJSON(raw json.RawMessage) (json.RawMessage, error) {
	if err := CheckJSONDepth("value", raw); err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
