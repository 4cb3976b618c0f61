// Package redis is backend.Store on Redis through go-redis/v9: every
// transition is one Lua script, so a transition, its event, its error
// entry, its counters, its index entries and its idempotency step commit
// together.
//
// Open opens a store from a URL and owns the client it makes; OpenClient
// opens one on a go-redis client the program has already, which stays the
// program's (Close leaves it open). Both take the same Options.
//
// # Namespaces and keys
//
// A store lives in a namespace (the URL's ns parameter or
// Options.Namespace, "sluice" by default). Every key of a namespace starts with the hash tag {ns}, so the
// whole namespace lives in one cluster slot and every script's keys share
// it. The layout, under the prefix {ns}:
//
//	schema             the namespace's schema version (a string)
//	job:ID             a job: hash (fields defined once in fields.go; empty fields not stored, nor a c f pr to at 0 and tg at [],
//	                   which read as those defaults) with fields id q(ueue) k(ind) p(ayload)
//	                   sv (schema version) m(etadata) tg (tags, JSON) pr(iority)
//	                   s(tate) a(ttempt) ma (max attempts) c (crash attempt)
//	                   fp (fingerprint) f(ence) sch (scheduled_at) dl (deadline)
//	                   to (timeout, ns) cr (created_at) ata (attempted_at) atb
//	                   (attempted_by) sca (state_changed_at) fin (finalized_at)
//	                   rs (terminal reason) lid lw lx (lease id, worker, expiry)
//	                   v(ersion) cp (checkpoint) dlo ro sb (dead_letter_of,
//	                   retry_of, superseded_by) le ep (last error, its pattern)
//	                   ne (how many error entries err:ID keeps; absent: none)
//	ev:ID              the job's stored timeline events (list)
//	err:ID             the job's error entries (list, capped by the plan)
//	ids                every job id (sorted set by id): bulk batches walk it
//	st:STATE           jobs of a state, by (state_changed_at, id); running
//	                   jobs are left out of st, sq and sk, so a claim and a
//	                   completion spare six entries: their listings gather
//	                   them from run. Available and completed jobs (every
//	                   job passes through them) are in none of st, sq and
//	                   sk either, but in sqk
//	sq:STATE:QUEUE     the same per queue
//	sk:STATE:KIND      the same per kind
//	sqk:STATE:Q US K   available or completed jobs of queue Q and kind K,
//	                   by (state_changed_at, id): one entry a job, in
//	                   place of one in each of st, sq and sk. Listings merge the sets
//	                   of the pairs their queues and kinds take, read in
//	                   one round trip (a queue of 200 kinds: a first page
//	                   in 1.4 ms against 0.5 for one kind:
//	                   BenchmarkListManyKinds)
//	qk                 every (queue US kind) pair that had a job (set)
//	eg:GROUP           jobs of an error group (state, queue, kind, pattern)
//	egi:GROUP          the same jobs by id: a group's bulk batches walk it
//	egc                error group -> number of jobs (hash)
//	egt                "queue US kind US pattern" -> "status US at US by US note":
//	                   operators' verdicts on error groups (hash, errgroups.go)
//	av:QUEUE:C         available jobs by priority, then (scheduled_at, id);
//	                   C is 0 (never crashed), 1 (crashed once), 2 (more)
//	dl:QUEUE           available jobs with a deadline, by (deadline, id)
//	due:STATE          scheduled or retryable jobs by (scheduled_at, id)
//	run                running jobs by (lease expiry, id)
//	fpj:FP             the ids of a fingerprint's jobs (set)
//	uq:KEY             the job holding unique key KEY, trusted only while
//	                   its state holds the key (lua.go, uholder)
//	ukj:KEY            the ids of the jobs carrying unique key KEY (set):
//	                   the unique: filter reads it
//	ukjobs             the ids of every job carrying a unique key (set): a
//	                   bulk retry's preview counts held keys among them
//	sup                the ids of superseded jobs (set)
//	counts             "queue US state" -> jobs (hash): the maintained counters
//	queues             every queue that had a job (set)
//	paused, pausedby   queue -> "1"/"0", and when and by whom (hashes)
//	limits             "scope US name" -> "n US at US by US key US rate US window": limits (hash)
//	lst:SCOPE US NAME  a rate limit's starts in its window (sorted set, score: seconds)
//	fpr:FP, fprs       quarantine records (hash each) and their set
//	fsc:FP             crashes per workflow step of a fingerprint (hash: step -> n)
//	w:ID, workers      worker heartbeats (hash each) and their set
//	lead:NAME          maintenance leases (hash)
//	op:ID, ops, opa    bulk operations (hash each), all and the active ones
//	                   by (created_at, id)
//	idem:KEY, idems:KEY, idemx   idempotency records, their steps, and the
//	                   records by expiry
//	sch:NAME, schs     periodic jobs' schedules (hash each, periodic.go)
//	                   and their names (sorted set at score 0)
//
// Sorted sets ordered by a time hold members "TIME:ID" at score 0, TIME
// being 19 decimal digits of unix nanoseconds: the lexical order is the
// (time, id) order, exact to the nanosecond, and keyset pages are
// ZRANGEBYLEX ranges either way. Only the claim sets score by priority.
//
// # What Redis cannot index
//
// Lists and counts walk the best index for their filter (ids, unique
// key, fingerprint, error group, state and queue or kind) and test the
// remaining conditions (tags, error text, payload. and meta. paths,
// times) in Go, reading jobs in chunks. The engine's lists and counts read at most a scan budget of
// jobs per request (scan_budget=N, DefaultScanBudget): past it the answer
// says it was bounded, how far it got and of how many (sluicetype.ScanReport),
// and its cursor scans on. Bulk operations walk the whole set in bounded
// batches. Counts of states and queues read the maintained counters.
package redis

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/sluicetype"
)

// DefaultNamespace is the namespace of a URL without ns, and of
// OpenClient without Options.Namespace.
const DefaultNamespace = "sluice"

// ErrNoStore is the error of a MustExist open of a namespace that is
// missing or not at this build's schema version.
var ErrNoStore = errors.New("no such store")

// Options tune a Store. The zero value is fine.
type Options struct {
	// Logger receives diagnostics, and go-redis's own lines about its
	// connections at Debug (liblog.go); silent when nil.
	Logger *slog.Logger
	// MustExist opens only a namespace that exists at this build's
	// schema: it never creates one.
	MustExist bool
	// Migrate creates a missing namespace and brings one that is behind
	// up to date; without it a namespace behind or ahead is refused,
	// naming both versions and `sluice migrate --store URL`. An empty
	// namespace is created unless MustExist is set.
	Migrate bool
	// ScanBudget bounds how many jobs one list or count reads to test
	// conditions no index serves (error text, tags, payload. and meta.
	// paths, times): past it the answer says it is partial
	// (sluicetype.ScanReport). 0 means DefaultScanBudget, or the URL's
	// scan_budget=N.
	ScanBudget int
	// Namespace is the namespace the store lives in (DefaultNamespace
	// when empty). The URL's ns wins over it.
	Namespace string
	// BatchBudget is the server's time one bulk batch script may take,
	// from 100µs to 1s (0: batchScriptBudget). The URL's batch_budget
	// wins over it.
	BatchBudget time.Duration
}

// DefaultScanBudget is the jobs one list or count examines at most.
const DefaultScanBudget = 10000

// Store is backend.Store on one Redis namespace.
type Store struct {
	c      goredis.UniversalClient
	ns     string
	prefix string // "{ns}:"
	anchor string // the schema key, KEYS[1] of every script
	url    string // redacted, for messages
	raw    string
	// ownClient: Open made the client, and Close closes it.
	ownClient bool
	log       *slog.Logger
	wake      *wakeHub // pubsub.go
	// scanBudget bounds the jobs one list or count reads (list.go).
	scanBudget int
	// batchBudget, when not zero, replaces batchScriptBudget (the URL's
	// batch_budget; tests: export_test.go).
	batchBudget time.Duration
	// opWalk: how far each operation's batches judged in Go got, so the
	// next judges about as many (operations.go).
	opMu   sync.Mutex
	opWalk map[string]walkHint
}

var _ backend.Store = (*Store)(nil)

// Target is a parsed Redis store URL.
type Target struct {
	Cluster   bool
	Addrs     []string
	Options   *goredis.Options // single server
	Namespace string
	// nsGiven: the URL names its namespace (ns=), which then wins over
	// Options.Namespace.
	nsGiven bool
	// ScanBudget is scan_budget=N (0 when absent).
	ScanBudget int
	// BatchBudget is batch_budget=DURATION (0 when absent): the server's
	// time one bulk batch script may take (batchScriptBudget).
	BatchBudget time.Duration
}

// URLParams are the parameters of a store URL that the store reads itself;
// go-redis reads the others, and refuses one it does not know.
func URLParams() []string { return []string{"ns", "scan_budget", "batch_budget"} }

// ParseURL reads redis://[user:pass@]host:port/db?ns=NAME,
// rediss://... (TLS) and redis+cluster://host1:port,host2:port?ns=NAME.
func ParseURL(raw string) (*Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("redis: %w: url: %s", sluicetype.ErrInvalid, redact.ParseError(err))
	}
	// u.Query drops a malformed pair without a word; a parameter the
	// user wrote must not vanish, so the query is parsed strictly.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("redis: %w: url query: %s", sluicetype.ErrInvalid, redact.ParseError(err))
	}
	ns := q.Get("ns")
	nsGiven := ns != ""
	if ns == "" {
		ns = DefaultNamespace
	}
	if err := checkNamespace(ns); err != nil {
		return nil, err
	}
	t := &Target{Namespace: ns, nsGiven: nsGiven}
	if v := q.Get("scan_budget"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("redis: %w: scan_budget=%q: want a positive number of jobs", sluicetype.ErrInvalid, v)
		}
		t.ScanBudget = n
	}
	q.Del("scan_budget")
	if v := q.Get("batch_budget"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Microsecond || d > time.Second {
			return nil, fmt.Errorf("redis: %w: batch_budget=%q: want a duration from 100µs to 1s", sluicetype.ErrInvalid, v)
		}
		t.BatchBudget = d
	}
	q.Del("batch_budget")
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss":
		q.Del("ns")
		u.RawQuery = q.Encode()
		o, err := goredis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("redis: %w: url: %s", sluicetype.ErrInvalid, redact.ParseError(err))
		}
		if o.ClientName == "" {
			// Named, so an operator (or a fault test) can find the
			// store's connections in CLIENT LIST.
			o.ClientName = "sluice:" + ns
		}
		if !q.Has("max_retries") {
			// A script is not safe to send twice: one that ran but whose
			// answer was lost would be run again (a claim of other jobs, a
			// finish refused as a lost lease). The engine handles a
			// failed call; retries stay off unless the URL asks.
			o.MaxRetries = -1
		}
		t.Options = o
	case "redis+cluster", "rediss+cluster":
		for a := range strings.SplitSeq(u.Host, ",") {
			if a != "" {
				t.Addrs = append(t.Addrs, a)
			}
		}
		if len(t.Addrs) == 0 {
			return nil, fmt.Errorf("redis: %w: cluster url names no server", sluicetype.ErrInvalid)
		}
		t.Cluster = true
	default:
		return nil, fmt.Errorf("redis: %w: %q is not a redis url", sluicetype.ErrInvalid, u.Scheme)
	}
	return t, nil
}

// checkNamespace refuses a namespace that would break its hash tag.
func checkNamespace(ns string) error {
	if strings.ContainsAny(ns, "{}") {
		return fmt.Errorf("redis: %w: namespace %q may not hold braces", sluicetype.ErrInvalid, ns)
	}
	return nil
}

// Open connects to the Redis a URL names and opens its namespace,
// creating or migrating it as the options allow (see Options). The store
// owns the client it makes, and Close closes it.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if t.nsGiven || opts.Namespace == "" {
		opts.Namespace = t.Namespace
	}
	opts.BatchBudget = cmp.Or(t.BatchBudget, opts.BatchBudget)
	opts.ScanBudget = cmp.Or(opts.ScanBudget, t.ScanBudget)
	var c goredis.UniversalClient
	if t.Cluster {
		// Redirections (MOVED, ASK) are followed; retries of a script that
		// may have run are not (see ParseURL).
		c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: t.Addrs, MaxRetries: -1,
			ClientName: "sluice:" + opts.Namespace})
	} else {
		o := *t.Options
		if !t.nsGiven && o.ClientName == "sluice:"+t.Namespace {
			o.ClientName = "sluice:" + opts.Namespace // ParseURL's name, for Options.Namespace
		}
		c = goredis.NewClient(&o)
	}
	s, err := open(ctx, c, rawURL, opts)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.ownClient = true
	return s, nil
}

// OpenClient opens the namespace opts.Namespace on a client the caller
// owns (a *redis.Client, a *redis.ClusterClient, ...), as Open does on the
// client it makes from a URL. The client stays the caller's: Close ends
// the store and its pub/sub subscription, never the client, which the
// caller closes after the store.
//
// The client's settings are the caller's too. Open's clients send no
// command twice (MaxRetries -1): a script whose answer was lost would run
// again, claiming other jobs or refusing a finish as a lost lease, so a
// client that retries (go-redis's default for a single server is 3) is
// logged as a warning at open; set MaxRetries: -1 in its options. Open's
// clients also name their connections "sluice:NAMESPACE" (ClientName).
func OpenClient(ctx context.Context, c goredis.UniversalClient, opts Options) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("redis: %w: OpenClient without a client", sluicetype.ErrInvalid)
	}
	opts.Namespace = cmp.Or(opts.Namespace, DefaultNamespace)
	s, err := open(ctx, c, clientURL(c, opts.Namespace), opts)
	if err != nil {
		return nil, err
	}
	if n := clientRetries(c); n > 0 {
		s.log.Warn("redis: the client sends a command again after a lost answer; a script may run twice (set MaxRetries: -1)", "store", s.url, "max_retries", n)
	}
	return s, nil
}

// clientURL names a caller's client as a store URL without credentials:
// its server (or cluster) and the namespace.
func clientURL(c goredis.UniversalClient, ns string) string {
	u := url.URL{Scheme: "redis", RawQuery: "ns=" + url.QueryEscape(ns)}
	switch c := c.(type) {
	case *goredis.Client:
		o := c.Options()
		if o.TLSConfig != nil {
			u.Scheme = "rediss"
		}
		u.Host, u.Path = o.Addr, "/"+strconv.Itoa(o.DB)
	case *goredis.ClusterClient:
		o := c.Options()
		u.Scheme = "redis+cluster"
		if o.TLSConfig != nil {
			u.Scheme = "rediss+cluster"
		}
		u.Host = strings.Join(o.Addrs, ",")
	}
	return u.String()
}

// clientRetries is how often a caller's client sends a command again
// (0 when it does not, or cannot tell).
func clientRetries(c goredis.UniversalClient) int {
	switch c := c.(type) {
	case *goredis.Client:
		return c.Options().MaxRetries
	case *goredis.ClusterClient:
		return c.Options().MaxRetries
	}
	return 0
}

// open opens the namespace opts.Namespace on c, Open's or the caller's,
// and leaves c open whatever it returns: closing it is the owner's.
func open(ctx context.Context, c goredis.UniversalClient, rawURL string, opts Options) (*Store, error) {
	if err := checkNamespace(opts.Namespace); err != nil {
		return nil, err
	}
	if b := opts.BatchBudget; b != 0 && (b < 100*time.Microsecond || b > time.Second) {
		return nil, fmt.Errorf("redis: %w: batch budget %v: want a duration from 100µs to 1s", sluicetype.ErrInvalid, b)
	}
	libLogTo(opts.Logger)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{c: c, ns: opts.Namespace, prefix: "{" + opts.Namespace + "}:", url: redact.URL(rawURL), raw: rawURL, log: opts.Logger}
	s.anchor = s.prefix + "schema"
	s.wake = newWakeHub(s)
	s.scanBudget = cmp.Or(opts.ScanBudget, DefaultScanBudget)
	s.batchBudget = opts.BatchBudget
	if err := s.openSchema(ctx, opts); err != nil {
		return nil, err
	}
	s.warnDurability(ctx)
	return s, nil
}

// warnDurability logs when the server would lose jobs silently: nothing
// kept on disk, or a memory policy that evicts keys.
func (s *Store) warnDurability(ctx context.Context) {
	if w := s.DurabilityWarnings(ctx); len(w) > 0 {
		for _, m := range w {
			s.log.Warn("redis: "+m, "store", s.url)
		}
	}
}

// openReadTries is how often an opening read is sent when its connection
// drops before the answer.
const openReadTries = 4

// readAgainOnDrop runs read, an idempotent read of the opening, again when
// its connection drops or cannot be made: a process that opens the store
// during a failover, a restart or a CLIENT KILL meets one EOF, which a new
// connection gets past. Scripts are never sent twice (see ParseURL); a
// GET is safe to be. An answer of the server (goredis.Error: Nil, NOAUTH,
// WRONGTYPE, ...) and the end of ctx are returned at once.
func readAgainOnDrop(ctx context.Context, read func() error) error {
	var err error
	for i := range openReadTries {
		if i > 0 {
			t := time.NewTimer(time.Duration(25<<i) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		err = read()
		var reply goredis.Error
		if err == nil || errors.As(err, &reply) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// DurabilityWarnings lists what about the server's configuration loses
// jobs silently: no AOF and no RDB snapshots, or a maxmemory-policy other
// than noeviction. Empty when the configuration cannot be read.
func (s *Store) DurabilityWarnings(ctx context.Context) []string {
	var out []string
	cfg, err := s.c.ConfigGet(ctx, "*").Result()
	if err != nil {
		return nil
	}
	if cfg["appendonly"] != "yes" && strings.TrimSpace(cfg["save"]) == "" {
		out = append(out, "the server keeps nothing on disk (appendonly no, save empty): a restart loses every job")
	}
	if p, ok := cfg["maxmemory-policy"]; ok && p != "noeviction" {
		out = append(out, fmt.Sprintf("maxmemory-policy is %s, not noeviction: under memory pressure the server deletes jobs", p))
	}
	return out
}

// URL is the URL the store was opened with; for a store on a caller's
// client (OpenClient), a URL of its server (or cluster) and namespace,
// without credentials.
func (s *Store) URL() string { return s.raw }

// Namespace is the store's namespace.
func (s *Store) Namespace() string { return s.ns }

// key is the full name of a key of the namespace: key("job", id) is
// "{ns}:job:ID".
func (s *Store) key(parts ...string) string { return s.prefix + strings.Join(parts, ":") }

// Backend names the implementation.
func (s *Store) Backend() string { return "redis" }

// Capabilities: every filter field (those Redis cannot index by a scan
// in Go, see the package doc), error groups, bulk operations, maintained
// counts, queue pausing, idempotency keys recorded in the mutation's
// script, pub/sub wake-ups (pubsub.go), and schedules (periodic.go).
func (s *Store) Capabilities() []backend.Capability {
	return []backend.Capability{
		backend.CapabilityFilterPayload, backend.CapabilityFilterMeta, backend.CapabilityFilterTags,
		backend.CapabilityFilterError, backend.CapabilityErrorGroups, backend.CapabilityOperations,
		backend.CapabilityCounts, backend.CapabilityQueuePause, backend.CapabilityIdempotency,
		backend.CapabilityWakeups, backend.CapabilityDurabilityWarnings, backend.CapabilityUnique,
		backend.CapabilitySchedules, backend.CapabilityLimits, backend.CapabilityAudit,
	}
}

// Close releases the store's connections: the client when Open made it,
// never a caller's client (OpenClient), on which a store's call after
// Close still reaches the server: stop using the store first.
func (s *Store) Close() error {
	s.wake.close()
	if !s.ownClient {
		return nil
	}
	return s.c.Close()
}

// Now is the store's clock: the Redis server's.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	t, err := s.c.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis: time: %w", err)
	}
	return t.UTC(), nil
}

// luaScript is one script: its text and SHA1, for EVALSHA.
type luaScript struct {
	src string
	sha string
}

func script(body string) *luaScript {
	src := luaPrelude() + expandRefs(luaLib+"local function body()\n"+body+"\nend\nlocal r = body()\nflush()\n"+
		"if AUD ~= '' and not (type(r) == 'table' and r.err) then audit_append(AUD) end\nreturn r\n", fieldRefs())
	h := sha1.Sum([]byte(src))
	return &luaScript{src: src, sha: hex.EncodeToString(h[:])}
}

// run runs a script under the namespace, with the idempotency key ctx
// carries (if any), by EVALSHA, loading it on NOSCRIPT. A refusal comes
// back as a *refusal; any other failure is wrapped with what.
func (s *Store) run(ctx context.Context, what string, sc *luaScript, args ...any) (any, error) {
	iw, _ := backend.IdempotencyWriteFrom(ctx)
	aud, err := auditArg(ctx)
	if err != nil {
		return nil, err
	}
	argv := make([]any, 0, len(args)+4)
	argv = append(argv, iw.Key, iw.Token, iw.Step)
	argv = append(argv, args...)
	argv = append(argv, aud)
	keys := []string{s.anchor}
	v, err := s.c.EvalSha(ctx, sc.sha, keys, argv...).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, err = s.c.Eval(ctx, sc.src, keys, argv...).Result()
	}
	if err != nil {
		if errors.Is(err, goredis.Nil) {
			return nil, nil
		}
		var re goredis.Error
		if errors.As(err, &re) {
			if r := parseRefusal(re.Error()); r != nil {
				if r.code == "IDEMHELD" {
					return nil, fmt.Errorf("idempotency key: %w: another request holds the key now; nothing was changed", sluicetype.ErrIdempotencyInFlight)
				}
				if r.code == "IDEMSTEP" {
					return nil, fmt.Errorf("idempotency key: step %s: %w: it was committed before", iw.Step, sluicetype.ErrConflict)
				}
				return nil, r
			}
		}
		return nil, fmt.Errorf("redis: %s: %w", what, err)
	}
	return v, nil
}

// refusal is a script's refusal: its code and facts.
type refusal struct {
	code string
	arg  string
}

func (r *refusal) Error() string { return "refused: " + r.code + " " + r.arg }

var refusalCodes = []string{"LEASE", "NOTFOUND", "STATE", "SUPER", "QUAR", "VERSION", "CONFLICT", "RETRY",
	"MISMATCH", "INFLIGHT", "LOST", "IDEMHELD", "IDEMSTEP", "UHELD"}

func parseRefusal(msg string) *refusal {
	msg = strings.TrimPrefix(msg, "ERR ")
	code, arg, _ := strings.Cut(msg, " ")
	for _, c := range refusalCodes {
		if c == code {
			return &refusal{code: code, arg: arg}
		}
	}
	return nil
}

func asRefusal(err error) (*refusal, bool) {
	var r *refusal
	if errors.As(err, &r) {
		return r, true
	}
	return nil, false
}
