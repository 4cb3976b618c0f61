// Package sqlite is the embedded default store: backend.Store on a SQLite
// file through modernc.org/sqlite (no cgo).
//
// The file is opened in WAL mode with two connection pools: one writer (a
// single connection; every write is a BEGIN IMMEDIATE transaction) and a
// pool of readers. Several processes may open the same file: writers wait
// for each other through SQLite's busy timeout, so write transactions are
// kept short. Every time is the store's clock (the Go process clock, UTC)
// taken once per transaction after the write lock is held, and stored as
// INTEGER unix nanoseconds.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/commithook"

	"modernc.org/sqlite"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/sluicetype"
)

// Options tune a Store. The zero value is fine.
type Options struct {
	// Logger receives migration and diagnostic messages; silent when nil.
	Logger *slog.Logger
	// ReadConns is the size of the read pool (4 when 0).
	ReadConns int
	// BusyTimeout is how long a statement waits for another connection's
	// lock, in this or another process (10s when 0).
	BusyTimeout time.Duration
	// MustExist opens only a store that exists and is migrated to this
	// build's schema: it never creates or migrates one. Commands that
	// only read (and every command acting on a store it does not own)
	// open stores so; a missing file or a schema behind is an error that
	// names `sluice migrate`.
	MustExist bool
}

// ErrNoStore is the error of a MustExist open of a store that is missing
// or not migrated.
var ErrNoStore = errors.New("no such store")

// Store is backend.Store on one SQLite file.
type Store struct {
	path string
	log  *slog.Logger
	w    *sql.DB // one connection: every write transaction
	// writeTurn hands the writer out first come, first served:
	// database/sql gives a freed connection to a random waiter, which let
	// a heartbeat wait seconds behind a stream of claims.
	writeTurn chan struct{}
	r         *sql.DB // read pool
	ck        *sql.DB // the background checkpointer's connection
	wstmts    stmtCache
	rstmts    stmtCache
	closed    atomic.Bool
	writes    atomic.Uint64 // committed write transactions
	stop      chan struct{}
	stopped   chan struct{}

	claimSQL sync.Map // kind signature -> *claimQueries
	limits   backend.LimitCache

	// The counter upserts, prepared once the schema is up to date: every
	// write transaction may need them, and a statement cannot be prepared
	// on the writer's one connection while a transaction holds it.
	countAdd, countsApply *sql.Stmt
}

var _ backend.Store = (*Store)(nil)

// Open opens (creating when missing) the SQLite file at dsn and brings its
// schema up to date. dsn is a file path; a sqlite:// URL is accepted too
// (see ParseURL).
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	path := dsn
	if strings.HasPrefix(dsn, "sqlite:") {
		p, err := ParseURL(dsn)
		if err != nil {
			return nil, err
		}
		path = p
	}
	if path == "" {
		return nil, fmt.Errorf("sqlite: %w: empty path", sluicetype.ErrInvalid)
	}
	if path == ":memory:" || strings.HasPrefix(path, "file:") || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite: %w: %q is not a plain file path", sluicetype.ErrInvalid, path)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MustExist {
		st, err := Status(ctx, path)
		if err != nil {
			return nil, err
		}
		switch {
		case !st.Exists:
			return nil, fmt.Errorf("sqlite: %s: %w: the file does not exist (create it with: sluice migrate --store sqlite://%s)", path, ErrNoStore, path)
		case st.Version < st.Latest:
			return nil, fmt.Errorf("sqlite: %s: %w: its schema is at version %d, this build needs %d (migrate it with: sluice migrate --store sqlite://%s)", path, ErrNoStore, st.Version, st.Latest, path)
		}
	}
	if err := createPrivate(path, opts.Logger); err != nil {
		return nil, err
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	// The writer's page cache is 8 MB, not more: a B-tree page split
	// (balance_nonroot) parks a page at the locking page's number
	// (sqlite3PagerRekey to page 262145), so nearly every commit that
	// splits a page truncates the cache by scanning its whole hash table,
	// and that costs in proportion to the cache. At 32 MB it took 8–10% of
	// the work loop's CPU (cpu_us_per_job of scripts/bench throughput).
	base := path + "?_pragma=busy_timeout(" + fmt.Sprint(opts.BusyTimeout.Milliseconds()) + ")" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" +
		"&_pragma=temp_store(MEMORY)&_pragma=cache_size(-8000)" +
		"&_pragma=journal_size_limit(67108864)"

	// The writer leaves checkpoints to the background checkpointer (its
	// own autocheckpoint is only a safety net), so a commit never waits
	// for the fsyncs of a checkpoint.
	w, err := sql.Open("sqlite", base+"&_pragma=wal_autocheckpoint(20000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	// Readers keep a smaller cache and sort on disk past it: a console
	// scrolling a million jobs would otherwise hold 32 MB per connection,
	// and a large sort all in memory.
	r, err := sql.Open("sqlite", readerDSN(base)+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)

	ck, err := sql.Open("sqlite", base)
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	ck.SetMaxOpenConns(1)
	ck.SetMaxIdleConns(1)
	ck.SetConnMaxLifetime(0)
	ck.SetConnMaxIdleTime(0)

	s := &Store{path: path, log: opts.Logger, w: w, writeTurn: make(chan struct{}, 1), r: r, ck: ck, stop: make(chan struct{}), stopped: make(chan struct{})}
	s.wstmts.db = w
	s.rstmts.db = r
	if err := w.PingContext(ctx); err != nil {
		close(s.stopped)
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if !opts.MustExist {
		if err := s.Migrate(ctx); err != nil {
			close(s.stopped)
			s.Close()
			return nil, err
		}
	}
	st, err := s.stmts(ctx, sqlCountAdd, sqlCountsApply)
	if err != nil {
		close(s.stopped)
		s.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.countAdd, s.countsApply = st[0], st[1]
	go s.checkpointer()
	return s, nil
}

// readerDSN is base with the read pool's cache and temp store.
func readerDSN(base string) string {
	base = strings.Replace(base, "&_pragma=temp_store(MEMORY)", "", 1)
	return strings.Replace(base, "&_pragma=cache_size(-8000)", "&_pragma=cache_size(-4000)", 1)
}

// checkpointInterval is how often the background checkpointer copies the
// write-ahead log into the database file when there were writes.
const checkpointInterval = 200 * time.Millisecond

// checkpointer runs passive checkpoints on its own connection while there
// are writes, so the writer's commits do not pay for them.
func (s *Store) checkpointer() {
	defer close(s.stopped)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	var seen uint64
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		n := s.writes.Load()
		if n == seen {
			continue
		}
		seen = n
		if _, err := s.ck.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
			s.log.Warn("sqlite: checkpoint", "file", s.path, "err", err)
		}
	}
}

// Path is the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Backend names the implementation.
func (s *Store) Backend() string { return "sqlite" }

// Close releases the store's connections. Calls after Close fail with
// sluicetype.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	<-s.stopped
	s.wstmts.close()
	s.rstmts.close()
	return errors.Join(s.r.Close(), s.ck.Close(), s.w.Close())
}

// Now is the store's clock: this process's, in UTC.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, sluicetype.ErrClosed
	}
	return now(), nil
}

func now() time.Time { return time.Now().UTC() }

// Checkpoint copies the write-ahead log into the database file and
// truncates the log, so the file alone holds every committed change.
func (s *Store) Checkpoint(ctx context.Context) error {
	if s.closed.Load() {
		return sluicetype.ErrClosed
	}
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", err)
	}
	return nil
}

// ParseURL turns a sqlite URL into a file path: sqlite://FILE (relative to
// the working directory), sqlite:///abs/path, sqlite:FILE, or a bare path.
func ParseURL(u string) (string, error) {
	var p string
	switch {
	case strings.HasPrefix(u, "sqlite://"):
		p = strings.TrimPrefix(u, "sqlite://")
	case strings.HasPrefix(u, "sqlite:"):
		p = strings.TrimPrefix(u, "sqlite:")
	case strings.Contains(u, "://"):
		return "", fmt.Errorf("sqlite: %w: %q is not a sqlite url", sluicetype.ErrInvalid, redact.URL(u))
	default:
		p = u
	}
	if strings.ContainsAny(p, "?#") && p != u {
		return "", fmt.Errorf("sqlite: %w: url %q: query and fragment are not supported", sluicetype.ErrInvalid, redact.URL(u))
	}
	if p != u {
		dp, err := url.PathUnescape(p)
		if err != nil {
			return "", fmt.Errorf("sqlite: %w: url %q: %v", sluicetype.ErrInvalid, redact.URL(u), err)
		}
		p = dp
	}
	if p == "" {
		return "", fmt.Errorf("sqlite: %w: url %q names no file", sluicetype.ErrInvalid, redact.URL(u))
	}
	return p, nil
}

// stmtCache keeps prepared statements by query text. Statements are
// prepared outside transactions (the writer has one connection, which a
// transaction holds) and bound to a transaction with Tx.StmtContext, which
// reuses the connection's prepared statement.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	st := c.m[query]
	c.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("sqlite: prepare: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*sql.Stmt)
	}
	if old := c.m[query]; old != nil {
		st.Close()
		return old, nil
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// stmts prepares (or finds) the writer statements for queries, in order.
func (s *Store) stmts(ctx context.Context, queries ...string) ([]*sql.Stmt, error) {
	out := make([]*sql.Stmt, len(queries))
	for i, q := range queries {
		st, err := s.wstmts.get(ctx, q)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// writeTx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it.
// now is read once the write lock is held, so the store's clock follows
// commit order across processes. Any error rolls the whole transaction
// back, which is why multi-row statements say UPDATE OR FAIL: they need no
// statement journal of their own.
func (s *Store) writeTx(ctx context.Context, fn func(tx *wtx, now time.Time) error) error {
	if s.closed.Load() {
		return sluicetype.ErrClosed
	}
	select {
	case s.writeTurn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writeTurn }()
	fn, err := s.audited(ctx, fn) // fn itself unless ctx carries an audit record
	if err != nil {
		return err
	}
	if fn, err = s.idempotent(ctx, fn); err != nil { // fn itself unless ctx carries an idempotency key
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	// A panic in fn or in the commit hook (a test killing the writer
	// before its commit) must not leave the writer's connection inside
	// the transaction; after a commit the rollback does nothing.
	defer tx.Rollback()
	if err := fn(&wtx{Tx: tx}, now()); err != nil {
		tx.Rollback()
		return err
	}
	commithook.Call(ctx)
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	s.writes.Add(1)
	return nil
}

// readStmt prepares (or finds) a statement of the read pool.
func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s.closed.Load() {
		return nil, sluicetype.ErrClosed
	}
	return s.rstmts.get(ctx, query)
}

// Capabilities: SQLite serves every filter field, error groups, bulk
// operations, maintained counts, queue pausing and idempotency keys
// committed with the mutation, and periodic jobs' schedules.
func (s *Store) Capabilities() []backend.Capability {
	return []backend.Capability{
		backend.CapabilityFilterPayload, backend.CapabilityFilterMeta, backend.CapabilityFilterTags,
		backend.CapabilityFilterError, backend.CapabilityErrorGroups, backend.CapabilityOperations,
		backend.CapabilityCounts, backend.CapabilityQueuePause, backend.CapabilityIdempotency,
		backend.CapabilityUnique, backend.CapabilitySchedules, backend.CapabilityLimits,
		backend.CapabilityAudit,
	}
}

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
