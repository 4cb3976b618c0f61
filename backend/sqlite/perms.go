package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
)

// createPrivate creates a store's file readable and writable by its
// owner only (0600), before SQLite opens it: the file holds every
// payload, and one that any local user can read bypasses the API's
// roles. SQLite gives the -wal and -shm files the database file's
// mode, so they are private too. An existing file keeps its mode; one
// that others may read is warned about, as ssh warns of a readable key.
func createPrivate(path string, log *slog.Logger) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o007 != 0 {
		log.Warn("sqlite store file is readable by other local users: every payload is; chmod 600 it (and its -wal and -shm)",
			"path", path, "mode", fmt.Sprintf("%#o", st.Mode().Perm()))
	}
	return nil
}
