package cli

import (
	"fmt"
	"log/slog"
	"os"
)

// warnIfShared warns when a file holding secrets (a tokens file) may be
// read by other local users, as ssh warns of a readable private key. It
// warns rather than refuses: group access can be deliberate (a service
// group), and a refusal at startup on an upgrade would stop a working
// server.
func warnIfShared(log *slog.Logger, path, what string) {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o007 == 0 {
		return
	}
	log.Warn(what+" is readable by other local users: anyone on this machine can act with its tokens; chmod 600 it",
		"path", path, "mode", fmt.Sprintf("%#o", st.Mode().Perm()))
}
