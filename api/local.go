package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Local returns a Client that calls this server in-process, as id: no
// socket and no token, but every rule of the API — roles, redaction,
// read-only mode, idempotency — exactly as for a remote caller. Consoles
// served over SSH use it, each as the identity its key was given.
func (s *Server) Local(id Identity, opts ClientOptions) *Client {
	opts.HTTPClient = &http.Client{Transport: &localTransport{h: s, id: id, source: opts.Source}}
	return NewClient("http://local", "", opts)
}

// localKey carries a Local caller's identity in a request's context. Only
// code in this process can set it: a request from the network never has
// it.
type localKey struct{}

// localIdentity is the identity a Local client put on r, if any.
func localIdentity(r *http.Request) (Identity, bool) {
	id, ok := r.Context().Value(localKey{}).(Identity)
	return id, ok
}

// localTransport serves a request with the handler on a goroutine and
// streams its answer back through a pipe, so event streams work as they
// do over a connection.
type localTransport struct {
	h      http.Handler
	id     Identity
	source string
}

func (t *localTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := context.WithValue(req.Context(), localKey{}, t.id)
	if t.source != "" {
		ctx = context.WithValue(ctx, localSourceKey{}, t.source)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := req.Clone(ctx)
	r.RemoteAddr = "local"
	r.RequestURI = req.URL.RequestURI()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &localWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				pw.CloseWithError(errors.New("api: local handler panicked"))
			}
			w.commit(http.StatusOK)
			pw.Close()
			_ = r.Body.Close() // a RoundTripper closes the request body, as net/http's server does
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &localBody{PipeReader: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// localBody ends the handler's request when the caller closes the answer.
type localBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *localBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// localWriter is the handler's side: the status and headers are handed
// over at the first write or flush, the body through the pipe.
type localWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header
}

func (w *localWriter) Header() http.Header { return w.header }

func (w *localWriter) commit(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		for k := range w.sent {
			if strings.HasPrefix(k, http.TrailerPrefix) {
				delete(w.sent, k)
			}
		}
		close(w.ready)
	})
}

func (w *localWriter) WriteHeader(code int) { w.commit(code) }

func (w *localWriter) Write(b []byte) (int, error) {
	w.commit(http.StatusOK)
	return w.pw.Write(b)
}

// Flush hands over the headers; the body needs none: the pipe delivers
// every write as it happens.
func (w *localWriter) Flush() { w.commit(http.StatusOK) }
