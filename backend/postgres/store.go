// Package postgres is backend.Store on PostgreSQL through pgx/v5 (pgxpool),
// for workers on many machines sharing one database.
//
// A store lives in one schema of a database (?schema= in the URL, default
// "sluice"), so several installs share a database. Its tables:
//
//	jobs               one row per job; times are bigint unix nanoseconds
//	                   from the server's clock; payload, metadata, errors,
//	                   checkpoint are jsonb, tags text[]
//	job_events         stored timeline rows (failures, crashes, operator
//	                   actions), deleted with their job by the statement
//	                   trigger jobs_delete_events (no foreign key: see
//	                   migration 0005)
//	job_counts         jobs per (queue, state), in 16 shards per pair, kept
//	                   exact by the transactions that move jobs
//	job_fingerprints   every job's fingerprint hash and id, kept by triggers
//	                   on jobs (insert, a changed fingerprint, delete), so a
//	                   claim and a completion write no fingerprint entry
//	                   (migration 0008)
//	fingerprints       quarantine records
//	workers, leaders   heartbeats and maintenance leases
//	queues             paused queues
//	operations         bulk operations and their leases
//	idempotency_keys,  idempotency records and the steps committed under
//	idempotency_steps  them, in the mutations' own transactions
//	job_archive        the cold archive (queues that opt in), partitioned
//	                   by month of eviction: job_archive_YYYYMM
//	schema_migrations  the applied versions of the embedded migrations
//
// Every statement names its tables with the schema, so nothing depends on
// a session's search_path (PgBouncer in transaction mode keeps no session
// state). Claims and completions are single statements (no BEGIN/COMMIT
// round trips): a claim picks rows with FOR UPDATE SKIP LOCKED and sets
// lease and fence in the same statement; a completion batch joins
// unnest()ed arrays. Other writes are one READ COMMITTED transaction each,
// locking the rows they check (SELECT … FOR UPDATE) before they decide
// what the engine's plan allows. Inserts and due jobs NOTIFY the
// channel of the schema once per statement; see Store.Wakeups.
//
// Open opens a store from a URL and owns the pool it makes; OpenPool
// opens one on a *pgxpool.Pool the program has already, which stays the
// program's (Close leaves it open). Both take the same Options.
//
// The store URL is a pgx URL (postgres:// or postgresql://) with the
// store's own parameters, which are taken off before pgx sees it. Each
// sets its Options field (Schema, Migrate, ListenURL, ArchiveQueues,
// ArchiveRetention, NoNotify, ClaimCursorAfter): a value in the URL wins
// over the field's, archive_queues adds to it.
//
//	schema=NAME              the schema (default sluice)
//	migrate=true             create and migrate the schema at open
//	listen_url=URL           a direct connection for LISTEN (PgBouncer)
//	archive_queues=a,b       queues whose evicted jobs are cold-archived
//	archive_retention=2160h  how long a closed archive month is kept
//	notify=false             send no NOTIFY (workers poll; see noNotify)
//	claim_cursor=25ms        a claim from the start this slow moves claims
//	                         to a cursor (see claimCursor); off: never
//
// Every other parameter is pgx's or the server's: pool_max_conns,
// default_query_exec_mode=simple_protocol (PgBouncer in transaction
// mode), application_name (default sluice), plan_cache_mode (default
// force_generic_plan, not sent in the simple protocol), synchronous_commit.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/commithook"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/sluicetype"
)

// Options tune a Store. The zero value opens an existing, up-to-date
// schema and refuses anything else. A URL parameter that sets a field
// (see the package doc) wins over it.
type Options struct {
	// Logger receives migration and diagnostic messages; silent when nil.
	Logger *slog.Logger
	// Schema is the schema the store lives in (DefaultSchema when empty;
	// the URL's schema= sets it).
	Schema string
	// MustExist opens only a schema that exists and is migrated to this
	// build's version; it never creates or migrates one (commands that
	// only read).
	MustExist bool
	// Migrate creates the schema and applies pending migrations at open
	// (`sluice migrate`, and processes told to migrate). Without it a
	// schema behind or ahead of this build is refused, naming both
	// versions and the command to run. The URL parameter migrate=true
	// sets it too.
	Migrate bool
	// MaxConns is the pool size (pgxpool's default when 0; the URL's
	// pool_max_conns wins). OpenPool ignores it: the pool is the caller's.
	MaxConns int32
	// NoListen opens no LISTEN connection: Wakeups then never fires and
	// workers poll.
	NoListen bool
	// ListenURL is a direct connection for LISTEN, when the pool's go
	// through PgBouncer in transaction mode (the URL's listen_url sets
	// it). Empty: a connection configured as the pool's.
	ListenURL string
	// NoNotify sends no NOTIFY: workers of other processes poll (the
	// URL's notify=false sets it; see the Store's noNotify).
	NoNotify bool
	// ClaimCursorAfter: a claim from the start of a queue's index that
	// takes this long moves the queue's claims to a cursor (see
	// claimCursor). 0 means 25ms; below 0, never. The URL's claim_cursor
	// sets it (off: never).
	ClaimCursorAfter time.Duration
	// ArchiveQueues opt queues into the cold archive: the retention sweep
	// copies their terminal jobs into job_archive before deleting them.
	// The URL parameter archive_queues=a,b adds to it.
	ArchiveQueues []string
	// ArchiveRetention is how long a closed month of the archive is kept
	// after it ends (0: forever). The URL parameter archive_retention
	// (a Go duration) sets it too.
	ArchiveRetention time.Duration
}

// Errors of Open.
var (
	// ErrNoStore: a MustExist open of a schema that is missing or behind.
	ErrNoStore = errors.New("no such store")
	// ErrSchemaVersion: the schema is behind or ahead of this build and
	// the store was not opened to migrate it.
	ErrSchemaVersion = errors.New("schema version mismatch")
)

// DefaultSchema is the schema of a URL without ?schema=.
const DefaultSchema = "sluice"

// URLParams are the parameters of a store URL that the store reads itself;
// the others go to the driver (pgx) as they are.
func URLParams() []string {
	return []string{"schema", "listen_url", "migrate", "archive_queues", "archive_retention", "notify", "claim_cursor"}
}

// DefaultApplicationName is the application_name of the store's
// connections unless the URL names one, so that faults and operators can
// find them in pg_stat_activity.
const DefaultApplicationName = "sluice"

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Store is backend.Store on one schema of a PostgreSQL database.
type Store struct {
	url      string // redacted, for messages
	schema   string
	log      *slog.Logger
	pool     *pgxpool.Pool
	ownPool  bool // Open made the pool, and Close closes it
	closed   atomic.Bool
	sqlCache sync.Map // query template -> query text with the schema
	// cursors: where each queue's claims start their scan (claimCursor).
	// cursorGen is the cursors' generation: a write that may put a job
	// behind a cursor moves it (cursorReset).
	cursorMu  sync.Mutex
	cursors   map[cursorKey]claimCursor
	limits    backend.LimitCache
	cursorGen uint64
	// probes: the claim probes running (claimProbe), waited for by Close;
	// fullClaims counts claims from the start of the index (tests).
	probes     sync.WaitGroup
	fullClaims atomic.Int64
	// claimCursorAfter: a claim from the start that took this long or
	// longer moves the queue's claims to a cursor (claim_cursor; <0:
	// never; 1ns puts every queue in cursor mode after its first claim).
	claimCursorAfter time.Duration
	// reap: where the expired-lease listing starts its scan (reapFloor).
	reapMu sync.Mutex
	reap   reapFloor
	// statsGiven: the jobs table has statistics (firstStats).
	statsGiven atomic.Bool
	listenURL  string
	notify     *notifier

	archiveQueues    []string
	archiveRetention time.Duration
	// noNotify: writes send no notification (notify=false). A NOTIFY
	// takes a lock, held until commit, that every committing
	// transaction which notified waits for in turn; a database whose
	// applications enqueue one job per transaction at high rates may
	// rather let workers poll.
	noNotify bool
}

var _ backend.Store = (*Store)(nil)

// config is a parsed store URL: the pool's configuration and the store's
// own parameters, zero when the URL leaves them out.
type config struct {
	pool      *pgxpool.Config
	schema    string
	listenURL string
	migrate   bool
	redacted  string

	archiveQueues    []string
	archiveRetention time.Duration
	noNotify         bool
	claimCursorAfter time.Duration // <0: never; 0: not given
}

// options are opts with the URL's parameters applied over them.
func (c *config) options(opts Options) Options {
	opts.Schema = cmp.Or(c.schema, opts.Schema)
	opts.ListenURL = cmp.Or(c.listenURL, opts.ListenURL)
	opts.Migrate = opts.Migrate || c.migrate
	opts.NoNotify = opts.NoNotify || c.noNotify
	opts.ClaimCursorAfter = cmp.Or(c.claimCursorAfter, opts.ClaimCursorAfter)
	opts.ArchiveRetention = cmp.Or(c.archiveRetention, opts.ArchiveRetention)
	opts.ArchiveQueues = append(slices.Clone(opts.ArchiveQueues), c.archiveQueues...)
	return opts
}

// parseURL splits the store's own parameters (schema, listen_url,
// migrate) off a postgres:// URL and parses the rest with pgxpool.
func parseURL(raw string) (*config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: store url: %s", sluicetype.ErrInvalid, redact.ParseError(err))
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("postgres: %w: %q is not a postgres:// url", sluicetype.ErrInvalid, redact.URL(raw))
	}
	c := &config{redacted: redact.URL(raw)}
	// u.Query drops a malformed pair without a word; a parameter the
	// user wrote must not vanish, so the query is parsed strictly.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: store url query: %s", sluicetype.ErrInvalid, redact.ParseError(err))
	}
	c.schema = q.Get("schema")
	if c.schema != "" && !schemaName.MatchString(c.schema) {
		return nil, fmt.Errorf("postgres: %w: schema %q: want lower-case letters, digits and _", sluicetype.ErrInvalid, c.schema)
	}
	c.listenURL = q.Get("listen_url")
	switch v := q.Get("migrate"); v {
	case "", "0", "false":
	case "1", "true":
		c.migrate = true
	default:
		return nil, fmt.Errorf("postgres: %w: migrate=%q: want true or false", sluicetype.ErrInvalid, v)
	}
	if v := q.Get("archive_queues"); v != "" {
		c.archiveQueues = strings.Split(v, ",")
	}
	if v := q.Get("archive_retention"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("postgres: %w: archive_retention=%q: want a duration such as 2160h", sluicetype.ErrInvalid, v)
		}
		c.archiveRetention = d
	}
	switch v := q.Get("notify"); v {
	case "", "1", "true":
	case "0", "false":
		c.noNotify = true
	default:
		return nil, fmt.Errorf("postgres: %w: notify=%q: want true or false", sluicetype.ErrInvalid, v)
	}
	switch v := q.Get("claim_cursor"); v {
	case "":
	case "off", "0", "false":
		c.claimCursorAfter = -1
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("postgres: %w: claim_cursor=%q: want a duration such as 25ms, or off", sluicetype.ErrInvalid, v)
		}
		c.claimCursorAfter = d
	}
	for _, k := range URLParams() {
		q.Del(k)
	}
	if q.Get("application_name") == "" {
		q.Set("application_name", DefaultApplicationName)
	}
	u.RawQuery = q.Encode()
	pc, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: store url %s: %v", sluicetype.ErrInvalid, c.redacted, err)
	}
	// Generic plans for the store's prepared statements: the claim and the
	// completion are large statements whose planning (about 2-3 ms on the
	// project machine) cost more than their execution, and PostgreSQL's
	// automatic choice kept planning them per execution. Their generic
	// plans are pinned by plan_test.go; reads whose plan must follow their
	// values run in the simple protocol (see withMode). A URL naming
	// plan_cache_mode keeps its own. Without prepared statements (the
	// simple protocol PgBouncer's transaction mode needs, or exec mode)
	// there is no plan cache to steer, and a PgBouncer refuses a startup
	// parameter it does not track, so none is sent.
	mode := pc.ConnConfig.DefaultQueryExecMode
	prepared := mode != pgx.QueryExecModeSimpleProtocol && mode != pgx.QueryExecModeExec
	if _, ok := pc.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok && prepared {
		pc.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	c.pool = pc
	return c, nil
}

// Open opens the store in the schema the URL names, on a pool of its
// own that Close closes. See Options for when it creates or migrates the
// schema.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	c, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.MaxConns > 0 && !strings.Contains(rawURL, "pool_max_conns") {
		c.pool.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, c.pool)
	if err != nil {
		return nil, fmt.Errorf("postgres: open %s: %w", c.redacted, err)
	}
	s, err := open(ctx, pool, c.redacted, c.options(opts))
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// OpenPool opens the store on a pool the caller owns, as Open does on
// the pool it makes from a URL: opts.Schema names the schema, and
// opts.Migrate creates or migrates it. The pool stays the caller's:
// Close closes the store and its LISTEN connection (a connection
// configured as the pool's, or opts.ListenURL), never the pool, which
// the caller closes after the store.
//
// The pool's settings are the caller's too. Open's pools plan the
// store's statements generically (plan_cache_mode=force_generic_plan, as
// the claim's planning costs more than its execution) and name their
// connections "sluice" (application_name); set both in the pool's
// ConnConfig.RuntimeParams for the same. Through PgBouncer in transaction
// mode the pool needs the simple protocol
// (ConnConfig.DefaultQueryExecMode) and opts.ListenURL a direct
// connection.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("postgres: %w: OpenPool without a pool", sluicetype.ErrInvalid)
	}
	return open(ctx, pool, poolName(pool, opts.Schema), opts)
}

// poolName names a caller's pool in messages as a URL without its
// password: the server, the user, the database and the schema.
func poolName(pool *pgxpool.Pool, schema string) string {
	cc := pool.Config().ConnConfig
	u := url.URL{Scheme: "postgres", Host: cc.Host, Path: "/" + cc.Database}
	if cc.Port != 0 {
		u.Host = net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	}
	if cc.User != "" {
		u.User = url.User(cc.User)
	}
	if schema != "" {
		u.RawQuery = "schema=" + url.QueryEscape(schema)
	}
	return u.String()
}

// open opens the store on pool, Open's or the caller's, and leaves the
// pool open whatever it returns: closing it is the owner's.
func open(ctx context.Context, pool *pgxpool.Pool, redacted string, opts Options) (*Store, error) {
	s, err := newStore(pool, redacted, opts)
	if err != nil {
		return nil, err
	}
	if opts.Migrate && !opts.MustExist {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	} else {
		st, err := s.Status(ctx)
		if err != nil {
			return nil, err
		}
		cmd := "sluice migrate --store " + redacted
		switch {
		case st.Version == 0 && opts.MustExist:
			return nil, fmt.Errorf("postgres: %s: %w: schema %q holds no sluice store (create it with: %s)", redacted, ErrNoStore, s.schema, cmd)
		case st.Version < st.Latest && opts.MustExist:
			return nil, fmt.Errorf("postgres: %s: %w: schema %q is at version %d, this build needs %d (migrate it with: %s)", redacted, ErrNoStore, s.schema, st.Version, st.Latest, cmd)
		case st.Version < st.Latest:
			return nil, fmt.Errorf("postgres: %s: %w: schema %q is at version %d, this build needs %d (migrate it with: %s; or let the process migrate it as it opens: migrate=true in the URL, Options.Migrate in a program, or sluice serve and worker with --migrate)", redacted, ErrSchemaVersion, s.schema, st.Version, st.Latest, cmd)
		case st.Version > st.Latest:
			return nil, fmt.Errorf("postgres: %s: %w: schema %q is at version %d, newer than this build's %d (use a newer sluice, or roll the schema back with: sluice migrate --store %s down N)", redacted, ErrSchemaVersion, s.schema, st.Version, st.Latest, redacted)
		}
	}
	if !opts.NoListen {
		listen := func() (*pgx.ConnConfig, error) { return pool.Config().ConnConfig, nil }
		if lu := opts.ListenURL; lu != "" {
			listen = func() (*pgx.ConnConfig, error) { return pgx.ParseConfig(lu) }
		}
		s.notify = newNotifier(s, listen)
	}
	return s, nil
}

// newStore is the store on pool with opts, neither checked nor migrated.
func newStore(pool *pgxpool.Pool, redacted string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	schema := cmp.Or(opts.Schema, DefaultSchema)
	if !schemaName.MatchString(schema) {
		return nil, fmt.Errorf("postgres: %w: schema %q: want lower-case letters, digits and _", sluicetype.ErrInvalid, schema)
	}
	return &Store{url: redacted, schema: schema, log: opts.Logger, pool: pool, listenURL: opts.ListenURL,
		archiveQueues:    archiveQueueList(opts.ArchiveQueues),
		archiveRetention: opts.ArchiveRetention, noNotify: opts.NoNotify,
		claimCursorAfter: cmp.Or(opts.ClaimCursorAfter, claimSlowFull)}, nil
}

// OpenForMigration opens the store's schema for `sluice migrate`: it
// neither migrates nor checks the schema's version, and listens for
// nothing. Use Status, Migrate and MigrateDown on it, then Close.
func OpenForMigration(ctx context.Context, rawURL string, log *slog.Logger) (*Store, error) {
	c, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, c.pool)
	if err != nil {
		return nil, fmt.Errorf("postgres: open %s: %w", c.redacted, err)
	}
	s, err := newStore(pool, c.redacted, c.options(Options{Logger: log}))
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// Schema is the schema the store lives in.
func (s *Store) Schema() string { return s.schema }

// Pool is the store's connection pool, for callers that run their own
// transactions (see EnqueueTx) and for tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Backend names the implementation.
func (s *Store) Backend() string { return "postgres" }

// Close releases the store's connections: the pool when Open made it,
// never a caller's pool (OpenPool). Calls after Close fail with
// sluicetype.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.notify != nil {
		s.notify.close()
	}
	// No probe starts once closed is seen under cursorMu; wait for the
	// ones that did.
	s.cursorMu.Lock()
	//lint:ignore SA2001 the lock is the barrier: it waits for a probe that holds it.
	s.cursorMu.Unlock()
	s.probes.Wait()
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// sqlNow is the store's clock in SQL: the server's, in unix nanoseconds
// (the server keeps microseconds).
const sqlNow = `(extract(epoch FROM clock_timestamp()) * 1000000000)::bigint`

// Now is the store's clock: the server's.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, sluicetype.ErrClosed
	}
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT `+sqlNow).Scan(&n); err != nil {
		return time.Time{}, fmt.Errorf("postgres: now: %w", err)
	}
	return fromNanos(n), nil
}

// sql returns a query template with {s} replaced by the quoted schema.
func (s *Store) sql(q string) string {
	if v, ok := s.sqlCache.Load(q); ok {
		return v.(string)
	}
	out := strings.ReplaceAll(q, "{s}", pgx.Identifier{s.schema}.Sanitize())
	s.sqlCache.Store(q, out)
	return out
}

// querier is what a store method runs statements on: the pool, a
// transaction of the store's, or a caller's transaction (EnqueueTx).
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// wtx is one write transaction: the pgx transaction, the store's now
// read at its start, and what the method running in it keeps for the
// idempotency step it may be (keep). It lives as long as the
// transaction: nothing of one transaction is kept on the Store, whose pool
// many goroutines use at once.
type wtx struct {
	pgx.Tx
	s      *Store
	now    time.Time
	nowNs  int64
	result any
	kept   bool
	// cursorsKept: the write put no job behind a claim cursor, or said
	// itself which queues it did (see claimCursor); else its commit
	// resets every cursor.
	cursorsKept bool
}

// keep hands v, the result the running method returns, to the step
// record of the transaction when it runs under an idempotency key.
func (t *wtx) keep(v any) { t.result, t.kept = v, true }

// q is s.sql, for brevity in transactions.
func (t *wtx) q(query string) string { return t.s.sql(query) }

// callerTx is the caller's own transaction a context carries (WithTx).
type callerTxKey struct{}

// maxTxAttempts bounds the retries of a transaction the server aborted
// for a deadlock or a serialization failure: nothing of it was committed.
const maxTxAttempts = 5

// writeTx runs fn in one transaction and commits it. The store's now is
// read first, in the transaction. A deadlock or serialization failure
// runs fn again in a new transaction. A context carrying a caller's
// transaction (WithTx) runs fn in it instead, in a savepoint, and leaves
// the commit to the caller.
func (s *Store) writeTx(ctx context.Context, fn func(tx *wtx) error) error {
	return refused(s.writeTxOnce(ctx, fn))
}

func (s *Store) writeTxOnce(ctx context.Context, fn func(tx *wtx) error) error {
	if s.closed.Load() {
		return sluicetype.ErrClosed
	}
	fn = s.idempotent(ctx, s.audited(ctx, fn))
	if ctl, ok := ctx.Value(callerTxKey{}).(pgx.Tx); ok {
		sp, err := ctl.Begin(ctx)
		if err != nil {
			return fmt.Errorf("postgres: savepoint: %w", err)
		}
		w, err := s.runTx(ctx, sp, fn)
		if err != nil {
			sp.Rollback(ctx)
			return err
		}
		commithook.Call(ctx)
		if err := sp.Commit(ctx); err != nil {
			return fmt.Errorf("postgres: release savepoint: %w", err)
		}
		s.wrote(w)
		return nil
	}
	for attempt := 1; ; attempt++ {
		err := s.commitTx(ctx, fn)
		if err != nil && attempt < maxTxAttempts && retryable(err) {
			continue
		}
		return err
	}
}

// commitTx runs fn in a transaction of the pool's and commits it. A
// panic in fn or in the commit hook (a test killing the writer before
// its commit) rolls the transaction back on its way up, so the pool gets
// its connection back; after a commit the rollback does nothing.
func (s *Store) commitTx(ctx context.Context, fn func(tx *wtx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	w, err := s.runTx(ctx, tx, fn)
	if err != nil {
		return err
	}
	commithook.Call(ctx)
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	s.wrote(w)
	return nil
}

// wrote follows a committed write: unless it kept them, the claim cursors
// start over.
func (s *Store) wrote(w *wtx) {
	if !w.cursorsKept {
		s.cursorReset()
	}
}

func (s *Store) runTx(ctx context.Context, tx pgx.Tx, fn func(*wtx) error) (*wtx, error) {
	var n int64
	if err := tx.QueryRow(ctx, `SELECT `+sqlNow).Scan(&n); err != nil {
		return nil, fmt.Errorf("postgres: now: %w", err)
	}
	w := &wtx{Tx: tx, s: s, now: fromNanos(n), nowNs: n}
	return w, fn(w)
}

// refused marks the server's refusal of the data itself (SQLSTATE class
// 22: a NUL or invalid UTF-8 in text or jsonb, a value out of range) or
// of a statement a caller's filter made too big for it (class 54: stack
// depth, too many arguments) as sluicetype.ErrInvalid: the request is at
// fault, not the store, so no outage opens and the API answers 400
// rather than 503. The engine refuses such
// input before it gets here (engine/text.go); this covers what it did not
// foresee.
func refused(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "54")) && !errors.Is(err, sluicetype.ErrInvalid) {
		return fmt.Errorf("%w: %w", sluicetype.ErrInvalid, err)
	}
	return err
}

// retryable reports a server error that aborted a transaction which may
// simply be run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	return false
}

// single runs one autocommitted statement-level write (claims,
// completions): on the pool, or in a transaction when the context
// carries an idempotency key or a caller's transaction, so those rules
// still hold.
func (s *Store) single(ctx context.Context, fn func(q querier) error) error {
	if s.closed.Load() {
		return sluicetype.ErrClosed
	}
	_, keyed := backend.IdempotencyWriteFrom(ctx)
	_, audited := backend.AuditWriteFrom(ctx)
	if _, ok := ctx.Value(callerTxKey{}).(pgx.Tx); ok || keyed || audited {
		return s.writeTx(ctx, func(tx *wtx) error { return fn(tx) })
	}
	for attempt := 1; ; attempt++ {
		err := fn(s.pool)
		if err != nil && attempt < maxTxAttempts && retryable(err) {
			continue
		}
		return refused(err)
	}
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// nanosPtr is a nullable time column's value.
func nanosPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	n := t.UnixNano()
	return &n
}

func timePtr(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := fromNanos(*n)
	return &t
}

// Capabilities: every filter field, error groups, bulk operations,
// maintained counts, queue pausing and idempotency keys committed with
// the mutation, the cold archive, schedules; LISTEN/NOTIFY wake-ups unless opened with NoListen.
func (s *Store) Capabilities() []backend.Capability {
	cs := []backend.Capability{
		backend.CapabilityFilterPayload, backend.CapabilityFilterMeta, backend.CapabilityFilterTags,
		backend.CapabilityFilterError, backend.CapabilityErrorGroups, backend.CapabilityOperations,
		backend.CapabilityCounts, backend.CapabilityQueuePause, backend.CapabilityIdempotency,
		backend.CapabilityArchive, backend.CapabilityUnique, backend.CapabilitySchedules,
		backend.CapabilityLimits, backend.CapabilityAudit,
	}
	if s.notify != nil {
		cs = append(cs, backend.CapabilityWakeups)
	}
	return cs
}
