package sqlite

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sluicehq/sluice/sluicetype"
)

// refused marks SQLite's refusal of a statement a caller's filter built
// (an expression tree past 1000 levels, too many parameters, a string or
// blob too big) as sluicetype.ErrInvalid: the request is at fault, not the
// store, so no outage opens and the API answers 400 rather than 503. The
// engine's filter bounds (engine/filterbounds.go) keep such filters from
// getting here; this covers what they did not foresee.
func refused(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) || errors.Is(err, sluicetype.ErrInvalid) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_ERROR, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_RANGE:
		return fmt.Errorf("%w: the store refused the query: %w", sluicetype.ErrInvalid, err)
	}
	return err
}
