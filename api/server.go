package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/outage"
)

// Prefix is the path under which every route of the API lives.
const Prefix = "/api/v1"

// DefaultMaxBody is the largest request body the server reads.
const DefaultMaxBody = 2 << 20

// Enqueuer is the capability POST /jobs needs beyond engine.Control; an
// *engine.Engine (and a *Client) has it. A server over a Control without it
// answers POST /jobs with 501.
type Enqueuer interface {
	EnqueueMany(ctx context.Context, ps []engine.EnqueueParams) ([]engine.EnqueueResult, error)
}

var _ Enqueuer = (*engine.Engine)(nil)

// ServerOptions configures a Server. The zero value serves every request
// as admin (see Tokens).
type ServerOptions struct {
	// Tokens maps each bearer token to who it names. With none, every
	// request acts as admin under the name "local": listen on loopback
	// only then.
	Tokens map[string]Identity
	// ReadOnly refuses every mutation with 403.
	ReadOnly bool
	// Logger receives request errors and, at debug level, each request;
	// tokens are never logged. Discarded when nil.
	Logger *slog.Logger
	// MaxBody bounds request bodies (DefaultMaxBody when 0); larger
	// ones get 413.
	MaxBody int64
	// IdempotencyStore keeps mutations' responses under their keys. When
	// nil: an EngineIdempotencyStore when the Control offers one (an
	// *engine.Engine whose store declares backend.CapabilityIdempotency),
	// else a MemoryIdempotencyStore.
	IdempotencyStore IdempotencyStore
	// IdempotencyTTL is how long a key is remembered
	// (DefaultIdempotencyTTL when 0), when IdempotencyStore is nil.
	IdempotencyTTL time.Duration
	// IdempotencyClaimTTL is how long a request holds its key in the
	// engine's store without renewing it, so how soon the key of a server
	// that died mid-request is taken over (DefaultIdempotencyClaimTTL
	// when 0), when IdempotencyStore is nil.
	IdempotencyClaimTTL time.Duration
	// Heartbeat is how often GET /events writes a comment to keep the
	// stream alive through proxies (15s when 0).
	Heartbeat time.Duration
	// ReadTimeout bounds one read (30s when 0); event streams and exports
	// have none.
	ReadTimeout time.Duration
	// HideErrorsFromViewers hides error text from viewers: attempts'
	// messages and traces, timeline messages, error groups (and the notes
	// they were resolved or ignored with), quarantine records' last
	// errors, step errors and operations' error text, and refuses them
	// filters on error text. For deployments whose errors repeat personal
	// data (a phone number in an SMS provider's error). By default every
	// role reads error text.
	HideErrorsFromViewers bool
	// BodyTimeout bounds reading one request body (DefaultBodyTimeout
	// when 0); a body slower than that is answered 408.
	BodyTimeout time.Duration
	// MutationTimeout bounds one mutation, which runs to its end even if
	// the client goes away so that its idempotency record is true
	// (2 minutes when 0).
	MutationTimeout time.Duration
	// Metrics counts the requests answered and serves GET /metrics;
	// apimetrics.New gives the Prometheus one. Nil: nothing is counted
	// and GET /metrics answers 404.
	Metrics Metrics
}

// Metrics records the requests a Server answers and serves its GET
// /metrics (to the viewer role and above).
type Metrics interface {
	http.Handler
	// Request counts one answered request by its route pattern ("GET
	// /api/v1/jobs", or "unmatched") and status code; took is negative
	// when the duration says nothing (an event stream, an unmatched path).
	Request(route string, code int, took time.Duration)
}

// Server serves an engine.Control over HTTP. It answers the routes under
// Prefix and GET /metrics (ServerOptions.Metrics); mount it as a whole (mux.Handle("/", srv)) or
// by prefix (mux.Handle("/api/", srv) and mux.Handle("/metrics", srv)).
type Server struct {
	ctl     engine.Control
	enq     Enqueuer
	opts    ServerOptions
	tokens  *tokenTable
	log     *slog.Logger
	idem    IdempotencyStore
	mux     *http.ServeMux
	metrics Metrics
	routes  []route
	view    *viewPolicy
	// out logs the answers of 503 (the store not answering) once per
	// outage rather than once per request, and when they stop.
	out *outage.Outage
}

// route is one method and path pattern with the least role it needs.
type route struct {
	method string
	path   string // a ServeMux path pattern, under Prefix or /metrics
	// role is the least role the route needs; "" needs no token.
	role engine.Role
	// action names a mutation in the audit trail, as the engine's
	// ActionInfo does (retry, bulk, pause, ...).
	action string
	// Exactly one of read (GET routes) and mutate (the rest) is set.
	read   func(w http.ResponseWriter, r *http.Request, c *caller) error
	mutate func(r *http.Request, c *caller, body []byte) (runFunc, error)
	// stream marks a read that answers for as long as it has data (an
	// export): the read timeout would cut it off, and its length says
	// nothing in the request metrics.
	stream bool
}

func (rt route) pattern() string { return rt.method + " " + rt.path }

// runFunc performs a mutation that has been decoded and authorised.
type runFunc func(ctx context.Context) (*reply, error)

// reply is a mutation's successful answer.
type reply struct {
	status int
	body   any
	header http.Header
}

func ok(body any) *reply { return &reply{status: http.StatusOK, body: body} }

// caller is who sent a request.
type caller struct {
	id    Identity
	actor string
	// view is what the server hides from viewers (viewer.go).
	view *viewPolicy
}

func (c *caller) can(r engine.Role) bool { return RoleAtLeast(c.id.Role, r) }

// NewServer builds a Server over ctl. POST /jobs works when ctl also
// implements Enqueuer.
func NewServer(ctl engine.Control, opts ServerOptions) *Server {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 30 * time.Second
	}
	if opts.MutationTimeout <= 0 {
		opts.MutationTimeout = 2 * time.Minute
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	s := &Server{
		ctl:    ctl,
		opts:   opts,
		tokens: newTokenTable(opts.Tokens),
		log:    opts.Logger,
		idem:   opts.IdempotencyStore,
		mux:    http.NewServeMux(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.out = outage.New(s.log, "api", outage.Options{})
	if s.idem == nil {
		if ie, ok := ctl.(IdempotencyEngine); ok && ie.IdempotencyDurable() {
			s.idem = NewEngineIdempotencyStore(ie, opts.IdempotencyTTL, opts.IdempotencyClaimTTL)
		} else {
			s.idem = NewMemoryIdempotencyStore(opts.IdempotencyTTL, 0, 0)
		}
	}
	if enq, ok := ctl.(Enqueuer); ok {
		s.enq = enq
	}
	s.view = newViewPolicy(opts.HideErrorsFromViewers)
	s.metrics = opts.Metrics
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	s.routes = s.routeTable()
	for _, rt := range s.routes {
		s.mux.Handle(rt.pattern(), s.handler(rt))
	}
	return s
}

// noMetrics counts nothing and has no GET /metrics.
type noMetrics struct{}

func (noMetrics) Request(string, int, time.Duration) {}
func (noMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writeError(w, newHTTPError(http.StatusNotFound, reasonNotFound, "no metrics on this server"))
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ *caller) error {
	s.metrics.ServeHTTP(w, r)
	return nil
}

// Routes lists the server's routes as "METHOD /path" patterns, for docs
// and tests.
func (s *Server) Routes() []string {
	out := make([]string, len(s.routes))
	for i, rt := range s.routes {
		out[i] = rt.pattern()
	}
	return out
}

// ServeHTTP answers one request. Unknown paths and methods get JSON 404
// and 405 answers like every other error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.metrics.Request("unmatched", s.notRouted(w, r), -1)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// notRouted answers a request no route takes, in JSON, with the status
// (404 or 405, with its Allow header) the mux would give, and returns it.
func (s *Server) notRouted(w http.ResponseWriter, r *http.Request) int {
	h, _ := s.mux.Handler(r)
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if probe.status == http.StatusMethodNotAllowed {
		writeError(w, newHTTPError(http.StatusMethodNotAllowed, reasonMethodNotAllowed, "method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, probe.header.Get("Allow")))
		return http.StatusMethodNotAllowed
	}
	writeError(w, newHTTPError(http.StatusNotFound, reasonNotFound, "no route %s %s", r.Method, r.URL.Path))
	return http.StatusNotFound
}

// probeWriter records what the mux's own error handler would answer.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header { return p.header }
func (p *probeWriter) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}
func (p *probeWriter) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}

// handler wraps a route with recovery, metrics, authentication,
// authorisation and, for mutations, the body and idempotency rules.
func (s *Server) handler(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panic", "route", rt.pattern(), "panic", p)
				if !sw.wrote {
					writeError(sw, newHTTPError(http.StatusInternalServerError, reasonInternal, "internal error"))
				}
			}
			took := time.Since(start)
			if rt.path == Prefix+"/events" || rt.stream {
				took = -1 // a stream's length says nothing
			}
			s.metrics.Request(rt.pattern(), sw.code(), took)
			s.log.Debug("request", "method", r.Method, "route", rt.path, "status", sw.code(), "dur", time.Since(start))
		}()
		defer closeUnlessBodyRead(sw, r)()
		c, err := s.authorize(r, rt)
		if err != nil {
			if status, _ := errorResponse(err); status == http.StatusForbidden && rt.mutate != nil {
				if who, aerr := s.authenticate(r); aerr == nil {
					s.auditRefusal(r, rt, who, err)
				}
			}
			writeError(sw, err)
			return
		}
		c.view = s.view
		ctx := engine.WithOrigin(engine.WithActor(r.Context(), c.actor), origin(r, c))
		r = r.WithContext(ctx)
		if rt.read != nil {
			if rt.path != Prefix+"/events" && !rt.stream {
				rctx, cancel := context.WithTimeout(ctx, s.opts.ReadTimeout)
				defer cancel()
				r = r.WithContext(rctx)
			}
			if err := rt.read(sw, r, c); err != nil {
				s.logFailure(rt, err)
				if !sw.wrote {
					writeError(sw, err)
				}
			} else {
				s.out.Succeed()
			}
			return
		}
		s.serveMutation(sw, r, rt, c)
	})
}

func (s *Server) logFailure(rt route, err error) {
	status, _ := errorResponse(err)
	switch {
	case status == http.StatusServiceUnavailable && outage.StoreUnavailable(err):
		// Every request meets an outage: say so once (s.out), not per
		// request. The backoff is the client's (Retry-After).
		s.out.Fail(err, "route", rt.pattern(), "status", status)
	case status >= 500:
		s.log.Warn("request failed", "route", rt.pattern(), "status", status, "err", err)
	default:
		// The store answered (a refusal, not found...).
		s.out.Succeed()
	}
}

// authorize finds the caller and checks the route's role and read-only
// mode.
func (s *Server) authorize(r *http.Request, rt route) (*caller, error) {
	if rt.role == "" {
		return &caller{id: Identity{Name: localActor, Role: engine.RoleViewer}}, nil
	}
	c, err := s.authenticate(r)
	if err != nil {
		return nil, err
	}
	if rt.mutate != nil && s.opts.ReadOnly {
		return nil, newHTTPError(http.StatusForbidden, reasonReadOnly, "the server is read-only: %s %s refused", r.Method, r.URL.Path)
	}
	if err := c.need(rt.role, rt.pattern()); err != nil {
		return nil, err
	}
	return c, nil
}

// authenticate finds who sent r: an in-process caller (Server.Local), whose
// identity stands in for a token; the bearer token's identity; or, with
// no tokens configured, the local admin.
func (s *Server) authenticate(r *http.Request) (*caller, error) {
	if id, ok := localIdentity(r); ok {
		return &caller{id: id, actor: id.Name}, nil
	}
	if s.tokens.empty() && !loopbackHost(r.Host) {
		return nil, errHostNotLoopback(r.Host)
	}
	id := Identity{Name: localActor, Role: engine.RoleAdmin}
	if !s.tokens.empty() {
		tok, ok := bearer(r)
		if !ok {
			return nil, newHTTPError(http.StatusUnauthorized, reasonUnauthorized, "missing bearer token: send Authorization: Bearer TOKEN")
		}
		if id, ok = s.tokens.lookup(tok); !ok {
			return nil, newHTTPError(http.StatusUnauthorized, reasonUnauthorized, "unknown bearer token")
		}
	}
	return &caller{id: id, actor: actorOf(r, id, !s.tokens.empty())}, nil
}

// need refuses the caller unless its role is at least role.
func (c *caller) need(role engine.Role, what string) error {
	if c.can(role) {
		return nil
	}
	e := newHTTPError(http.StatusForbidden, reasonForbidden, "role %s may not %s (needs %s)", c.id.Role, what, role)
	e.body.Role, e.body.Needs = c.id.Role, role
	return e
}

// IdempotencyHeader carries the key of a mutating request.
const (
	IdempotencyHeader = "Idempotency-Key"
	ReplayedHeader    = "Idempotent-Replayed"
	maxKeyLength      = 255
)

// serveMutation reads and checks a mutation's body, decodes it, and runs
// it under its idempotency key.
func (s *Server) serveMutation(w http.ResponseWriter, r *http.Request, rt route, c *caller) {
	key := r.Header.Get(IdempotencyHeader)
	if key == "" {
		writeError(w, newHTTPError(http.StatusBadRequest, reasonIdempotencyMissing, "%s header required on %s %s", IdempotencyHeader, r.Method, r.URL.Path))
		return
	}
	if len(key) > maxKeyLength || strings.ContainsFunc(key, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) }) {
		writeError(w, badRequest("%s must be 1–%d printable ASCII characters", IdempotencyHeader, maxKeyLength))
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	run, err := rt.mutate(r, c, body)
	if err != nil {
		if status, _ := errorResponse(err); status == http.StatusForbidden {
			s.auditRefusal(r, rt, c, err)
		}
		writeError(w, err)
		return
	}

	scoped := strings.Join([]string{c.id.Name, r.Method, r.URL.EscapedPath(), key}, "\n")
	h := sha256.New()
	for _, part := range [][]byte{[]byte(r.Method), []byte(r.URL.EscapedPath()), []byte(r.URL.RawQuery), []byte(r.Header.Get("If-Match")), body} {
		h.Write(part)
		h.Write([]byte{0})
	}
	hash := hex.EncodeToString(h.Sum(nil))
	outcome, stored, hold, err := s.idem.Begin(r.Context(), scoped, hash)
	if err != nil {
		writeError(w, fmt.Errorf("idempotency store: %w", err))
		return
	}
	switch outcome {
	case IdempotencyReplay:
		for k, vs := range stored.Header {
			w.Header()[k] = vs
		}
		w.Header().Set(ReplayedHeader, "true")
		w.WriteHeader(stored.Status)
		_, _ = w.Write(stored.Body)
		return
	case IdempotencyInFlight:
		err := newHTTPError(http.StatusConflict, reasonIdempotencyInFlight, "a request with %s %q is still in progress; retry later", IdempotencyHeader, key)
		s.auditRefusal(r, rt, c, err)
		writeError(w, err)
		return
	case IdempotencyMismatch:
		writeError(w, newHTTPError(http.StatusUnprocessableEntity, reasonIdempotencyMismatch, "%s %q was used for a different request", IdempotencyHeader, key))
		return
	}

	// The mutation runs to its end even if the client goes away, so that
	// what the key records is what happened; the record is written on a
	// context of its own, which the mutation's timeout does not end.
	base := context.WithoutCancel(r.Context())
	endRecord := func() (context.Context, context.CancelFunc) { return context.WithTimeout(base, 30*time.Second) }
	done := false
	defer func() {
		if !done { // a panic: free the key (or leave what the engine committed to be taken over), let recovery answer
			ectx, ecancel := endRecord()
			defer ecancel()
			_ = hold.Abandon(ectx)
		}
	}()
	ctx, cancel := context.WithTimeout(hold.Context(base), s.opts.MutationTimeout)
	defer cancel()
	resp := s.respond(run(ctx))
	done = true
	ectx, ecancel := endRecord()
	defer ecancel()
	if resp.Status >= 500 {
		_ = hold.Abandon(ectx)
		if resp.Status == http.StatusServiceUnavailable {
			// The store did not answer: once per outage (s.out).
			s.out.Fail(fmt.Errorf("mutation answered %d: %s", resp.Status, resp.Body), "route", rt.pattern(), "status", resp.Status)
		} else {
			s.log.Warn("mutation failed", "route", rt.pattern(), "status", resp.Status, "err", string(resp.Body))
		}
	} else {
		s.out.Succeed()
		if err := hold.Complete(ectx, resp); err != nil {
			s.log.Warn("idempotency record not kept", "route", rt.pattern(), "err", err)
		}
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// respond renders a mutation's outcome as the response to send and keep.
func (s *Server) respond(rep *reply, err error) StoredResponse {
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	if err != nil {
		status, body := errorResponse(err)
		if status == http.StatusServiceUnavailable {
			hdr.Set("Retry-After", "1")
		}
		return StoredResponse{Status: status, Header: hdr, Body: marshalBody(body)}
	}
	for k, vs := range rep.header {
		hdr[k] = vs
	}
	return StoredResponse{Status: rep.status, Header: hdr, Body: marshalBody(rep.body)}
}

func marshalBody(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":"response not encodable","reason":"internal"}` + "\n")
	}
	return buf.Bytes()
}

// readBody reads a request body within MaxBody. A body that is present
// must be declared JSON; an absent one is fine (the route says whether it
// needs one).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := newHTTPError(http.StatusRequestEntityTooLarge, reasonBodyTooLarge, "request body over %d bytes", s.opts.MaxBody)
	if r.ContentLength > s.opts.MaxBody {
		return nil, tooLarge
	}
	lift := bodyDeadline(w, s.opts.BodyTimeout)
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	lift()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		if isTimeout(err) {
			return nil, newHTTPError(http.StatusRequestTimeout, reasonBodyTimeout, "request body not read within %s", s.opts.BodyTimeout)
		}
		return nil, badRequest("reading request body: %v", err)
	}
	bodyRead(w)
	if len(b) == 0 {
		return nil, nil
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		if ct == "" {
			ct = "none"
		}
		return nil, newHTTPError(http.StatusUnsupportedMediaType, reasonUnsupportedMedia, "request body must be JSON (Content-Type: application/json); got %s", ct)
	}
	return b, nil
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(marshalBody(v))
}

// writeError answers err as an error body.
func writeError(w http.ResponseWriter, err error) {
	status, body := errorResponse(err)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, body)
}

// statusWriter remembers the status written, for metrics and recovery.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.status
}
