package api

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/redact"
)

// Client is an engine.Control over the HTTP API: the console and the
// command line use it to attach to a remote server. Errors from the server
// unwrap to the engine's sentinels (errors.Is(err, engine.ErrNotFound)).
//
// Reads are retried on network errors and 502/503/504; mutations are
// retried the same way with the same Idempotency-Key, so the server runs
// each at most once.
type Client struct {
	base    *url.URL
	baseErr error
	token   string
	opts    ClientOptions
	hc      *http.Client
	stream  *http.Client
}

var (
	_ engine.Control = (*Client)(nil)
	_ Enqueuer       = (*Client)(nil)
)

// ClientOptions tunes a Client. The zero value is sensible.
type ClientOptions struct {
	// HTTPClient sends the requests; one with its own transport when nil.
	// Its Timeout, if any, also ends event streams: leave it 0 and use
	// Timeout.
	HTTPClient *http.Client
	// Timeout bounds one attempt of a request (30s when 0); event streams
	// have none.
	Timeout time.Duration
	// Retries is how many times a failed attempt is repeated (3 when 0,
	// none when negative).
	Retries int
	// RetryBackoff is the first pause between attempts, doubled each time
	// (200ms when 0).
	RetryBackoff time.Duration
	// StreamIdle ends an event stream that has been silent this long and
	// reconnects (45s when 0; the server pings every 15s).
	StreamIdle time.Duration
	// UserAgent is sent with every request.
	UserAgent string
	// Surface names, for the audit trail, what the client's user acts
	// through (engine.SurfaceConsole, SurfaceCLI, SurfaceSSH); the API
	// itself when empty.
	Surface engine.Surface
	// Source is the source a Local client's actions are recorded with
	// (an SSH session's key fingerprint). A remote client's source is
	// its address, which it does not choose: this is ignored.
	Source string
}

// NewClient returns a Client for the server at baseURL
// (http://host:port, with or without the /api/v1 prefix), sending token as
// a bearer token unless it is empty. A malformed baseURL makes every call
// fail with an error wrapping engine.ErrInvalid.
func NewClient(baseURL, token string, opts ClientOptions) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Retries == 0 {
		opts.Retries = 3
	} else if opts.Retries < 0 {
		opts.Retries = 0
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 200 * time.Millisecond
	}
	if opts.StreamIdle <= 0 {
		opts.StreamIdle = 45 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "sluice-api-client"
	}
	c := &Client{token: token, opts: opts}
	c.base, c.baseErr = parseBaseURL(baseURL)
	c.hc = opts.HTTPClient
	if c.hc == nil {
		c.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	c.stream = c.hc
	return c
}

func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: api url %q: want http://host:port or https://host:port", engine.ErrInvalid, redact.URL(raw))
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), Prefix)
	u.RawQuery, u.Fragment, u.RawPath = "", "", ""
	return u, nil
}

// call is one API request.
type call struct {
	method string
	path   string // under Prefix, already escaped
	query  url.Values
	body   []byte // JSON
	header http.Header
	out    any // decoded from a 2xx answer when non-nil
}

func (c *Client) mutating(cl *call) bool { return cl.method != http.MethodGet }

// do sends a call, retrying as the Client's options say, and decodes a 2xx
// answer into cl.out. It returns the last response's headers.
func (c *Client) do(ctx context.Context, cl *call) (http.Header, error) {
	if c.baseErr != nil {
		return nil, c.baseErr
	}
	target := c.base.Scheme + "://" + c.base.Host + c.base.EscapedPath() + Prefix + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	key := ""
	if c.mutating(cl) {
		key = newKey()
	}
	backoff := c.opts.RetryBackoff
	var lastErr error
	for attempt := 0; ; attempt++ {
		hdr, retry, wait, err := c.attempt(ctx, cl, target, key)
		if err == nil {
			return hdr, nil
		}
		lastErr = err
		if !retry || attempt >= c.opts.Retries || ctx.Err() != nil {
			return hdr, lastErr
		}
		if wait <= 0 {
			wait = backoff + time.Duration(rand.Int64N(int64(backoff)/2+1))
			backoff = min(2*backoff, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, lastErr
		case <-time.After(wait):
		}
	}
}

// attempt sends one request. retry says whether another attempt may
// succeed; wait is the server's Retry-After, if any.
func (c *Client) attempt(ctx context.Context, cl *call, target, key string) (hdr http.Header, retry bool, wait time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, target, body)
	if err != nil {
		return nil, false, 0, fmt.Errorf("%w: %v", engine.ErrInvalid, err)
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	c.decorate(ctx, req)
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(IdempotencyHeader, key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if isCanceled(ctx, err) {
			return nil, false, 0, ctx.Err()
		}
		return nil, true, 0, fmt.Errorf("%s %s: %w: %v", cl.method, cl.path, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		if isCanceled(ctx, err) {
			return nil, false, 0, ctx.Err()
		}
		return resp.Header, true, 0, fmt.Errorf("%s %s: reading answer: %w: %v", cl.method, cl.path, ErrUnavailable, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if cl.out != nil {
			if err := json.Unmarshal(data, cl.out); err != nil {
				return resp.Header, false, 0, fmt.Errorf("%s %s: undecodable answer: %v", cl.method, cl.path, err)
			}
		}
		return resp.Header, false, 0, nil
	}
	apiErr := decodeError(resp.StatusCode, data)
	switch {
	case resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusServiceUnavailable,
		resp.StatusCode == http.StatusGatewayTimeout, resp.StatusCode == http.StatusTooManyRequests:
		retry = true
	case apiErr.Reason == reasonIdempotencyInFlight:
		retry = true // the first attempt is still running: wait for its answer
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			wait = min(time.Duration(n)*time.Second, 10*time.Second)
		}
	}
	return resp.Header, retry, wait, apiErr
}

// decorate adds the headers every request carries.
func (c *Client) decorate(ctx context.Context, req *http.Request) {
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.opts.UserAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// The default actor names nobody: send only one the caller set.
	if a := engine.ActorFrom(ctx); a != "operator" {
		req.Header.Set(ActorHeader, a)
	}
	if c.opts.Surface != "" {
		req.Header.Set(SurfaceHeader, string(c.opts.Surface))
	}
}

// newKey returns a fresh idempotency key.
func newKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: request does not encode as JSON: %v", engine.ErrInvalid, err)
	}
	return b, nil
}

func esc(s string) string { return url.PathEscape(s) }

// Meta describes the server's backend and this client's caller.
func (c *Client) Meta(ctx context.Context) (*engine.Meta, error) {
	var m engine.Meta
	if _, err := c.do(ctx, &call{method: "GET", path: "/meta", out: &m}); err != nil {
		return nil, err
	}
	return &m, nil
}

// filterQuery writes a filter as GET parameters: the q grammar, which the
// server parses back to the same filter.
func filterQuery(f engine.Filter) url.Values {
	v := url.Values{}
	if q := f.String(); q != "" {
		v.Set("q", q)
	}
	return v
}

func (c *Client) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	v := filterQuery(p.Filter)
	if p.Cursor != "" {
		v.Set("cursor", p.Cursor)
	}
	if p.Limit != 0 {
		v.Set("limit", strconv.Itoa(p.Limit))
	}
	var page engine.JobPage
	if _, err := c.do(ctx, &call{method: "GET", path: "/jobs", query: v, out: &page}); err != nil {
		return nil, err
	}
	return &page, nil
}

func (c *Client) GetJob(ctx context.Context, id string, includePayload bool) (*engine.JobDetail, error) {
	v := url.Values{}
	if includePayload {
		v.Set("include_payload", "true")
	}
	var d engine.JobDetail
	if _, err := c.do(ctx, &call{method: "GET", path: "/jobs/" + esc(id), query: v, out: &d}); err != nil {
		return nil, err
	}
	return &d, nil
}

func (c *Client) Counts(ctx context.Context, queue string) (*engine.Counts, error) {
	v := url.Values{}
	if queue != "" {
		v.Set("queue", queue)
	}
	var cs engine.Counts
	if _, err := c.do(ctx, &call{method: "GET", path: "/jobs/counts", query: v, out: &cs}); err != nil {
		return nil, err
	}
	return &cs, nil
}

// CountJobs asks GET /jobs/counts/filter for the filter's counts per
// state.
func (c *Client) CountJobs(ctx context.Context, p engine.CountJobsParams) (*engine.JobCounts, error) {
	v := filterQuery(p.Filter)
	if p.Max != 0 {
		v.Set("max", strconv.FormatInt(p.Max, 10))
	}
	if p.Whole {
		v.Set("whole", "true")
	}
	var out engine.JobCounts
	if _, err := c.do(ctx, &call{method: "GET", path: "/jobs/counts/filter", query: v, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) Queues(ctx context.Context) ([]engine.QueueInfo, error) {
	var out queuesResponse
	if _, err := c.do(ctx, &call{method: "GET", path: "/queues", out: &out}); err != nil {
		return nil, err
	}
	return out.Queues, nil
}

func (c *Client) PauseQueue(ctx context.Context, queue string) error {
	_, err := c.do(ctx, &call{method: "POST", path: "/queues/" + esc(queue) + "/pause"})
	return err
}

func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	_, err := c.do(ctx, &call{method: "POST", path: "/queues/" + esc(queue) + "/resume"})
	return err
}

// ListLimits reads GET /limits.
func (c *Client) ListLimits(ctx context.Context) ([]engine.Limit, error) {
	var out limitsResponse
	if _, err := c.do(ctx, &call{method: "GET", path: "/limits", out: &out}); err != nil {
		return nil, err
	}
	return out.Limits, nil
}

// SetLimit sets one limit through PUT /limits.
func (c *Client) SetLimit(ctx context.Context, l engine.Limit) error {
	b, err := jsonBody(limitSetRequest{Scope: l.Scope, Name: l.Name, Concurrency: &l.Concurrency, Key: l.Key,
		Rate: l.Rate, RateWindow: int64(l.RateWindow)})
	if err != nil {
		return err
	}
	_, err = c.do(ctx, &call{method: "PUT", path: "/limits", body: b})
	return err
}

// jobCall posts to a job's action route and returns the job answered.
func (c *Client) jobCall(ctx context.Context, method, path string, body any) (*engine.Job, error) {
	cl := &call{method: method, path: path}
	if body != nil {
		b, err := jsonBody(body)
		if err != nil {
			return nil, err
		}
		cl.body = b
	}
	var out jobResponse
	cl.out = &out
	if _, err := c.do(ctx, cl); err != nil {
		return nil, err
	}
	return out.Job, nil
}

func (c *Client) Retry(ctx context.Context, id string, opts engine.RetryOptions) (*engine.Job, error) {
	var body any
	if opts.Force || opts.Deadline != nil {
		body = retryRequest{Force: opts.Force, Deadline: opts.Deadline}
	}
	return c.jobCall(ctx, "POST", "/jobs/"+esc(id)+"/retry", body)
}

func (c *Client) Cancel(ctx context.Context, id string) (*engine.Job, error) {
	return c.jobCall(ctx, "POST", "/jobs/"+esc(id)+"/cancel", nil)
}

func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, &call{method: "DELETE", path: "/jobs/" + esc(id)})
	return err
}

func (c *Client) ReleaseJob(ctx context.Context, id string) (*engine.Job, error) {
	return c.jobCall(ctx, "POST", "/jobs/"+esc(id)+"/release", nil)
}

func (c *Client) UpdatePayload(ctx context.Context, id string, payload json.RawMessage, version int64) (*engine.Job, error) {
	cl := &call{method: "PUT", path: "/jobs/" + esc(id) + "/payload", body: []byte(payload),
		header: http.Header{"If-Match": {etag(version)}}}
	if len(payload) == 0 {
		cl.body = nil
	}
	var out jobResponse
	cl.out = &out
	if _, err := c.do(ctx, cl); err != nil {
		return nil, err
	}
	return out.Job, nil
}

func (c *Client) RetryWithInput(ctx context.Context, id string, p engine.RetryWithInputParams) (*engine.Job, error) {
	return c.jobCall(ctx, "POST", "/jobs/"+esc(id)+"/retry-with-input", retryWithInputRequest{ID: p.ID, Payload: p.Payload})
}

func (c *Client) Apply(ctx context.Context, action engine.Action, ids []string) ([]engine.ActionResult, error) {
	b, err := jsonBody(actionsRequest{Action: action, IDs: ids})
	if err != nil {
		return nil, err
	}
	var out actionsResponse
	if _, err := c.do(ctx, &call{method: "POST", path: "/jobs/actions", body: b, out: &out}); err != nil {
		return nil, err
	}
	return out.Results, nil
}

func (c *Client) Bulk(ctx context.Context, p engine.BulkParams) (*engine.BulkResult, error) {
	req := bulkRequest{Action: p.Action, DryRun: p.DryRun, RatePerSecond: p.RatePerSecond, Plan: planWireOf(p.Plan), StartAt: p.StartAt,
		Canary: canaryWireOf(p.Canary)}
	if !p.Selector.IsEmpty() || p.Plan == nil {
		sel := selectorOf(p.Selector)
		req.Selector = &sel
	}
	b, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var out engine.BulkResult
	if _, err := c.do(ctx, &call{method: "POST", path: "/jobs/bulk", body: b, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// selectorOf writes a filter in the plural wire form.
func selectorOf(f engine.Filter) selectorWire {
	return selectorWire{
		States: f.States, Queues: f.Queues, Kinds: f.Kinds, IDs: f.IDs, Tags: f.Tags,
		Fingerprint: f.Fingerprint, UniqueKey: f.UniqueKey, Error: f.Error, ErrorPattern: f.ErrorPattern,
		Payload: f.Payload, Meta: f.Meta,
		CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore,
		FinalizedAfter: f.FinalizedAfter, FinalizedBefore: f.FinalizedBefore,
		IncludeSuperseded: f.IncludeSuperseded,
	}
}

func (c *Client) Operation(ctx context.Context, id string) (*engine.Operation, error) {
	var op engine.Operation
	if _, err := c.do(ctx, &call{method: "GET", path: "/operations/" + esc(id), out: &op}); err != nil {
		return nil, err
	}
	return &op, nil
}

func (c *Client) Operations(ctx context.Context, limit int, cursor string) (*engine.OperationPage, error) {
	v := url.Values{}
	if limit != 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	var page engine.OperationPage
	if _, err := c.do(ctx, &call{method: "GET", path: "/operations", query: v, out: &page}); err != nil {
		return nil, err
	}
	return &page, nil
}

// Audit pages the audit trail (GET /audit).
func (c *Client) Audit(ctx context.Context, q engine.AuditQuery) (*engine.AuditPage, error) {
	v := url.Values{}
	for name, val := range map[string]string{"actor": q.Actor, "action": q.Action, "job": q.JobID,
		"operation": q.Operation, "cursor": q.After} {
		if val != "" {
			v.Set(name, val)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var page engine.AuditPage
	if _, err := c.do(ctx, &call{method: "GET", path: "/audit", query: v, out: &page}); err != nil {
		return nil, err
	}
	return &page, nil
}

func (c *Client) CancelOperation(ctx context.Context, id string) (*engine.Operation, error) {
	var op engine.Operation
	if _, err := c.do(ctx, &call{method: "POST", path: "/operations/" + esc(id) + "/cancel", out: &op}); err != nil {
		return nil, err
	}
	return &op, nil
}

func (c *Client) ResumeOperation(ctx context.Context, id string) (*engine.Operation, error) {
	var op engine.Operation
	if _, err := c.do(ctx, &call{method: "POST", path: "/operations/" + esc(id) + "/resume", out: &op}); err != nil {
		return nil, err
	}
	return &op, nil
}

func (c *Client) Quarantine(ctx context.Context) ([]*engine.Fingerprint, error) {
	var out fingerprintsResponse
	if _, err := c.do(ctx, &call{method: "GET", path: "/quarantine", out: &out}); err != nil {
		return nil, err
	}
	return out.Fingerprints, nil
}

// Signal sends a signal through POST /jobs/{id}/signals/{name}; the
// payload is the body (null when empty). The reply carries no payload.
func (c *Client) Signal(ctx context.Context, id, name string, payload json.RawMessage) (*engine.Signal, error) {
	var out signalResponse
	cl := &call{method: "POST", path: "/jobs/" + esc(id) + "/signals/" + esc(name), body: []byte(payload), out: &out}
	if len(payload) == 0 {
		cl.body = nil
	}
	if _, err := c.do(ctx, cl); err != nil {
		return nil, err
	}
	s := out.Signal
	return &engine.Signal{JobID: s.JobID, Name: s.Name, Seq: s.Seq, SentAt: s.SentAt}, nil
}

func (c *Client) ReleaseFingerprint(ctx context.Context, fingerprint string) (int, error) {
	var out releasedResponse
	if _, err := c.do(ctx, &call{method: "DELETE", path: "/quarantine/" + esc(fingerprint), out: &out}); err != nil {
		return 0, err
	}
	return out.Released, nil
}

// EnqueueMany enqueues jobs through POST /jobs; each job is accepted or
// refused on its own, as with the engine.
func (c *Client) EnqueueMany(ctx context.Context, ps []engine.EnqueueParams) ([]engine.EnqueueResult, error) {
	out := make([]engine.EnqueueResult, len(ps))
	for start := 0; start < len(ps); start += MaxEnqueueBatch {
		chunk := ps[start:min(start+MaxEnqueueBatch, len(ps))]
		reqs := make([]enqueueRequest, len(chunk))
		for i, p := range chunk {
			r, err := enqueueRequestOf(p)
			if err != nil {
				return nil, err
			}
			reqs[i] = r
		}
		b, err := jsonBody(reqs)
		if err != nil {
			return nil, err
		}
		var resp enqueueBatchResponse
		if _, err := c.do(ctx, &call{method: "POST", path: "/jobs", body: b, out: &resp}); err != nil {
			return nil, err
		}
		if len(resp.Results) != len(chunk) {
			return nil, fmt.Errorf("enqueue: %d results for %d jobs", len(resp.Results), len(chunk))
		}
		for i, r := range resp.Results {
			res := engine.EnqueueResult{Job: r.Job, Existing: r.Existing}
			if r.Error != "" {
				res.Err = &Error{Status: statusOfReason(r.Reason), Reason: r.Reason, Message: r.Error}
			}
			out[start+i] = res
		}
	}
	return out, nil
}

// Enqueue enqueues one job through POST /jobs.
func (c *Client) Enqueue(ctx context.Context, p engine.EnqueueParams) (*engine.Job, error) {
	res, err := c.EnqueueMany(ctx, []engine.EnqueueParams{p})
	if err != nil {
		return nil, err
	}
	return res[0].Job, res[0].Err
}

// statusOfReason is the status an error of that reason has, for errors
// that came inside a 200 answer.
func statusOfReason(reason string) int {
	switch reason {
	case reasonNotFound:
		return http.StatusNotFound
	case reasonConflict, reasonWrongState:
		return http.StatusConflict
	case reasonQuarantined:
		return http.StatusLocked
	case reasonUnsupported:
		return http.StatusNotImplemented
	case reasonPayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case reasonUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// errStreamIdle ends a stream that stopped sending.
var errStreamIdle = errors.New("event stream silent")

// reopenAtOnce bounds the first reconnection after a stream drops: a
// stream cut by a proxy, or by a server that went away and is already
// back, is open again within it; past it the subscriber is told the
// stream is lost (engine.ChangeLost) rather than left to think it live.
const reopenAtOnce = time.Second

// reopenBackoffMax caps the pause between reconnections of a lost stream:
// a server that is back is heard again within about a second (the
// console says live then), while a dead one is asked at most once a
// second.
const reopenBackoffMax = time.Second

// Subscribe streams changes over GET /events. It returns once the first
// connection is up (an error if it cannot be made). After a connection
// drops it reconnects at once; when that fails it sends ChangeLost with
// the error, so the consumer knows the server is away from the start,
// and goes on reconnecting with backoff (doubled from RetryBackoff, at
// most a second). Once a connection is up again it
// sends ChangeResync, since changes may have been missed in between. A
// server whose store is away says so on the stream ("lost" event): that
// is sent on as ChangeLost with an error that is ErrUnavailable, and the
// resync the server sends when its store is back follows it. The
// channel closes when ctx ends.
func (c *Client) Subscribe(ctx context.Context) (<-chan engine.Change, error) {
	body, err := c.openStream(ctx, c.opts.Timeout)
	if err != nil {
		return nil, err
	}
	out := make(chan engine.Change, 64)
	send := func(ch engine.Change) bool {
		select {
		case out <- ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(out)
		for {
			c.readStream(ctx, body, out)
			if ctx.Err() != nil {
				return
			}
			body, err = c.openStream(ctx, min(c.opts.Timeout, reopenAtOnce))
			if err != nil {
				if ctx.Err() != nil || !send(engine.Change{Kind: engine.ChangeLost, Err: err}) {
					return
				}
				backoff := min(c.opts.RetryBackoff, reopenBackoffMax)
				for {
					select {
					case <-ctx.Done():
						return
					case <-time.After(backoff):
					}
					backoff = min(2*backoff, reopenBackoffMax)
					if body, err = c.openStream(ctx, c.opts.Timeout); err == nil {
						break
					}
				}
			}
			if !send(engine.Change{Kind: engine.ChangeResync}) {
				body.Close()
				return
			}
		}
	}()
	return out, nil
}

// stream is an open event stream and the watchdog that ends it when it
// goes silent.
type stream struct {
	body   io.ReadCloser
	cancel context.CancelCauseFunc
	idle   *time.Timer
}

func (s *stream) Close() error {
	s.idle.Stop()
	s.cancel(nil)
	return s.body.Close()
}

// openStream opens GET /events; connect bounds the wait for the answer's
// headers.
func (c *Client) openStream(ctx context.Context, connect time.Duration) (*stream, error) {
	if c.baseErr != nil {
		return nil, c.baseErr
	}
	sctx, cancel := context.WithCancelCause(ctx)
	target := c.base.Scheme + "://" + c.base.Host + c.base.EscapedPath() + Prefix + "/events"
	req, err := http.NewRequestWithContext(sctx, "GET", target, nil)
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("%w: %v", engine.ErrInvalid, err)
	}
	c.decorate(ctx, req)
	req.Header.Set("Accept", "text/event-stream")
	timer := time.AfterFunc(connect, func() { cancel(errStreamIdle) })
	resp, err := c.stream.Do(req)
	timer.Stop()
	if err != nil {
		cancel(nil)
		if isCanceled(ctx, err) {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("GET /events: %w: %v", ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel(nil)
		return nil, decodeError(resp.StatusCode, data)
	}
	s := &stream{body: resp.Body, cancel: cancel}
	s.idle = time.AfterFunc(c.opts.StreamIdle, func() { cancel(errStreamIdle) })
	return s, nil
}

// readStream forwards a stream's changes to out until it ends.
func (c *Client) readStream(ctx context.Context, s *stream, out chan<- engine.Change) {
	defer s.Close()
	rd := newSSEReader(s.body)
	for {
		ev, err := rd.next()
		if err != nil {
			return
		}
		s.idle.Reset(c.opts.StreamIdle)
		if ev.data == "" {
			continue
		}
		var ch engine.Change
		switch ev.name {
		case "", sseEventChange:
			if json.Unmarshal([]byte(ev.data), &ch) != nil {
				continue
			}
		case sseEventLost:
			// The server is here but its store is not: said as the 503
			// a request would get now, so errors.Is(err, ErrUnavailable).
			var l lostEvent
			if json.Unmarshal([]byte(ev.data), &l) != nil {
				continue
			}
			ch = engine.Change{Kind: engine.ChangeLost, Err: &Error{
				Status: http.StatusServiceUnavailable, Reason: l.Reason, Message: "server's store: " + l.Error}}
		default:
			continue
		}
		select {
		case out <- ch:
		case <-ctx.Done():
			return
		}
	}
}
