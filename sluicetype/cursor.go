package sluicetype

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf8"
)

// CursorDir is the way a job cursor pages.
type CursorDir string

const (
	// CursorNext pages towards older rows: (state_changed_at, id)
	// strictly less than the cursor's key.
	CursorNext CursorDir = "next"
	// CursorPrev pages back towards newer rows: (state_changed_at, id)
	// strictly greater than the cursor's key.
	CursorPrev CursorDir = "prev"
)

// Cursor is a keyset position in ListJobs, whose rows are ordered newest
// first by (state_changed_at, id). Clients see it only as the opaque
// string Encode returns.
type Cursor struct {
	At  time.Time
	ID  string
	Dir CursorDir
}

// OperationCursor is a keyset position in Operations, ordered newest first
// by (created_at, id); it pages only towards older operations.
type OperationCursor struct {
	CreatedAt time.Time
	ID        string
}

// The wire form, before base64url without padding:
//
//	version (1 byte) | type (1 byte) | [direction (1 byte), jobs only] |
//	seconds since the Unix epoch (int64, big-endian) | nanoseconds (uint32,
//	big-endian) | id (the rest, UTF-8)
const (
	cursorVersion  = 1
	cursorTypeJob  = 'j'
	cursorTypeOp   = 'o'
	cursorDirNext  = 'n'
	cursorDirPrev  = 'p'
	cursorMaxID    = 1024
	cursorMaxBytes = 3 + 12 + cursorMaxID
	// cursorMaxEncoded bounds the text DecodeCursor looks at.
	cursorMaxEncoded = (cursorMaxBytes*8 + 5) / 6
)

// Encode returns the cursor as an opaque URL-safe string. A Dir that is
// empty encodes as CursorNext.
func (c Cursor) Encode() string {
	dir := byte(cursorDirNext)
	switch c.Dir {
	case CursorPrev:
		dir = cursorDirPrev
	case CursorNext, "":
	default:
		dir = 0 // DecodeCursor refuses it
	}
	b := make([]byte, 0, 3+12+len(c.ID))
	b = append(b, cursorVersion, cursorTypeJob, dir)
	return encodeCursorKey(b, c.At, c.ID)
}

// Encode returns the cursor as an opaque URL-safe string.
func (c OperationCursor) Encode() string {
	b := make([]byte, 0, 2+12+len(c.ID))
	b = append(b, cursorVersion, cursorTypeOp)
	return encodeCursorKey(b, c.CreatedAt, c.ID)
}

func encodeCursorKey(b []byte, at time.Time, id string) string {
	b = binary.BigEndian.AppendUint64(b, uint64(at.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(at.Nanosecond()))
	b = append(b, id...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a cursor Encode wrote. Anything else, including a
// cursor from a newer version or for operations, is an error wrapping
// ErrInvalid. The time is in UTC.
func DecodeCursor(s string) (Cursor, error) {
	b, err := decodeCursorBytes(s, cursorTypeJob)
	if err != nil {
		return Cursor{}, err
	}
	if len(b) < 1 {
		return Cursor{}, cursorError("too short")
	}
	var c Cursor
	switch b[0] {
	case cursorDirNext:
		c.Dir = CursorNext
	case cursorDirPrev:
		c.Dir = CursorPrev
	default:
		return Cursor{}, cursorError("unknown direction")
	}
	c.At, c.ID, err = decodeCursorKey(b[1:])
	if err != nil {
		return Cursor{}, err
	}
	return c, nil
}

// DecodeOperationCursor reads a cursor OperationCursor.Encode wrote.
func DecodeOperationCursor(s string) (OperationCursor, error) {
	b, err := decodeCursorBytes(s, cursorTypeOp)
	if err != nil {
		return OperationCursor{}, err
	}
	var c OperationCursor
	c.CreatedAt, c.ID, err = decodeCursorKey(b)
	if err != nil {
		return OperationCursor{}, err
	}
	return c, nil
}

func cursorError(why string) error {
	return fmt.Errorf("%w: malformed cursor: %s", ErrInvalid, why)
}

// decodeCursorBytes checks the envelope and returns what follows the type.
func decodeCursorBytes(s string, typ byte) ([]byte, error) {
	if s == "" {
		return nil, cursorError("empty")
	}
	if len(s) > cursorMaxEncoded {
		return nil, cursorError("too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, cursorError("not base64url")
	}
	if len(b) < 2 {
		return nil, cursorError("too short")
	}
	if b[0] != cursorVersion {
		return nil, cursorError(fmt.Sprintf("unknown version %d", b[0]))
	}
	if b[1] != typ {
		if b[1] == cursorTypeJob || b[1] == cursorTypeOp {
			return nil, cursorError("a cursor for another list")
		}
		return nil, cursorError("unknown type")
	}
	return b[2:], nil
}

func decodeCursorKey(b []byte) (time.Time, string, error) {
	if len(b) < 12 {
		return time.Time{}, "", cursorError("too short")
	}
	sec := int64(binary.BigEndian.Uint64(b))
	nsec := binary.BigEndian.Uint32(b[8:])
	if nsec >= 1e9 {
		return time.Time{}, "", cursorError("bad time")
	}
	id := b[12:]
	if len(id) == 0 {
		return time.Time{}, "", cursorError("no id")
	}
	if len(id) > cursorMaxID || !utf8.Valid(id) || bytes.IndexByte(id, 0) >= 0 {
		return time.Time{}, "", cursorError("bad id")
	}
	return time.Unix(sec, int64(nsec)).UTC(), string(id), nil
}
