package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// go-redis reports pool trouble ("connection pool: failed to dial after 5
// attempts", one line per failed command) through one process-wide
// logger, which by default writes to stderr. In the console stderr is the
// terminal the screen is drawn on, so a Redis outage scribbled over it.
// Open points that logger at the stores' own: the engine already says once
// per outage that the store is unreachable, so the library's lines go in
// at Debug, and its recovered panics at Error.

// libLogger is the go-redis logger: it forwards to the logger of the
// store opened last with one (a process-wide hook has one destination),
// and drops the lines while no store has given one.
type libLogger struct {
	to atomic.Pointer[slog.Logger]
}

// libLog is the one libLogger go-redis is given; it holds no more than
// the destination (libLogTo).
var libLog = &libLogger{}

// The hook is set before any client of this package exists, so no pool
// reads it while it changes.
func init() { goredis.SetLogger(libLog) }

// libLogTo sends go-redis's lines to l from now on (nil leaves them where
// they go).
func libLogTo(l *slog.Logger) {
	if l != nil {
		libLog.to.Store(l)
	}
}

func (g *libLogger) Printf(ctx context.Context, format string, v ...any) {
	l := g.to.Load()
	if l == nil {
		return
	}
	msg := fmt.Sprintf(format, v...)
	level := slog.LevelDebug
	if strings.Contains(msg, "panic") {
		level = slog.LevelError
	}
	l.Log(ctx, level, "redis client: "+strings.TrimPrefix(msg, "redis: "))
}
