// Package otlptest is a collector for tests: an HTTP server that takes
// OTLP/HTTP protobuf exports of traces and metrics, as a real collector's
// OTLP receiver does on port 4318, and keeps what it was sent. Tests
// point a real SDK's exporters at it (OTEL_EXPORTER_OTLP_ENDPOINT), in
// the test's process or in a child's.
package otlptest

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a span as the collector received it, its attributes and its
// resource's as text.
type Span struct {
	Name     string
	Kind     string // SPAN_KIND_CONSUMER, ...
	TraceID  string
	Attrs    map[string]string
	Resource map[string]string
	Status   string // STATUS_CODE_ERROR, ...
	Links    int
}

// Collector is a running test collector.
type Collector struct {
	// URL is the base to give as OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	mu       sync.Mutex
	spans    []Span
	metrics  []string // names, in the order first received
	requests int
}

// New starts a collector on a free loopback port, closed when the test
// ends.
func New(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Listen starts a collector on addr (as the exporters' default,
// 127.0.0.1:4318), closed when the test ends.
func Listen(t testing.TB, addr string) (*Collector, error) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("otlptest: %w", err)
	}
	c := &Collector{URL: "http://" + ln.Addr().String()}
	srv := httptest.NewUnstartedServer(c)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return c, nil
}

// ServeHTTP takes one export.
func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.requests++
	c.mu.Unlock()
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var answer proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.addSpans(&req)
		answer = &coltracepb.ExportTraceServiceResponse{}
	case "/v1/metrics":
		var req colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.addMetrics(&req)
		answer = &colmetricpb.ExportMetricsServiceResponse{}
	default:
		http.NotFound(w, r)
		return
	}
	out, err := proto.Marshal(answer)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *Collector) addSpans(req *coltracepb.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, Span{
					Name: s.GetName(), Kind: s.GetKind().String(), TraceID: fmt.Sprintf("%x", s.GetTraceId()),
					Attrs: attrs(s.GetAttributes()), Resource: res,
					Status: s.GetStatus().GetCode().String(), Links: len(s.GetLinks()),
				})
			}
		}
	}
}

func (c *Collector) addMetrics(req *colmetricpb.ExportMetricsServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if !slices.Contains(c.metrics, m.GetName()) {
					c.metrics = append(c.metrics, m.GetName())
				}
			}
		}
	}
}

// attrs is a list of attributes as text.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Spans are the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// Metrics are the names of the metrics received so far.
func (c *Collector) Metrics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.metrics)
}

// Requests is how many requests of any path the collector was sent.
func (c *Collector) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}
