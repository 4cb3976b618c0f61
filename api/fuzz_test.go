package api

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// Fuzz targets for the request decoders: no input panics, every refusal
// wraps engine.ErrInvalid, and what is accepted passes the engine's own
// validation. Their seed corpora run with the ordinary tests.

func FuzzDecodeBulk(f *testing.F) {
	for _, s := range []string{
		`{"action":"retry","selector":{"state":"archived","queue":"billing"},"dry_run":true}`,
		`{"action":"retry","selector":{"states":["archived","cancelled"],"queues":["billing"]},"dry_run":false}`,
		`{"action":"delete","selector":{"q":"state:archived error:\"timeout\" payload.customer:42"}}`,
		`{"action":"retry","selector":{"state":"archived","states":["cancelled"],"q":"queue:email"}}`,
		`{"action":"cancel","selector":{"created_after":"2024-05-01T00:00:00Z","payload":[{"path":"a.b","value":"1"}]}}`,
		`{"action":"retry","selector":{}}`,
		`{"action":"retry","selector":{"fingerprint":"ABC"}}`,
		`{"action":"retry","selector":{"state":"archived"},"rate_per_second":-1}`,
		`{"action":"retry","selector":{"state":"archived"}} trailing`,
		`{"action":"retry","selector":{"status":"archived"}}`,
		`[]`, `null`, ``, `{`, `{"selector":null}`,
		`{"action":"retry","selector":{"q":"error:\u0000"}}`,
		`{"action":"retry","selector":{"payload":[{"path":"o","value":"{\"p\":[1,2.0]}"}],"meta":[{"path":"m","value":"x\u0000"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeBulk(body)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("refusal does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if p.Action == "" || p.Selector.IsEmpty() || p.RatePerSecond < 0 {
			t.Fatalf("accepted %+v", p)
		}
		if err := p.Selector.Validate(); err != nil {
			t.Fatalf("accepted a selector the engine refuses: %v", err)
		}
	})
}

func FuzzDecodeActions(f *testing.F) {
	for _, s := range []string{
		`{"action":"retry","ids":["JOB_1","JOB_2"]}`,
		`{"action":"delete","ids":[]}`,
		`{"action":"","ids":["a"]}`,
		`{"action":"retry","ids":"JOB_1"}`,
		`{"action":"retry","ids":["a"],"extra":1}`,
		`{"action":"retry","ids":[null]}`,
		`{"ids":["a"]}`, `{}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeActions(body)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("refusal does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if r.Action == "" || len(r.IDs) == 0 || len(r.IDs) > engine.MaxApplyIDs {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func FuzzParseListQuery(f *testing.F) {
	for _, s := range []string{
		"state=archived&limit=50",
		"state=archived,cancelled&queue=billing&kind=email&limit=200",
		"q=state:archived+queue:billing+error:%22timeout%22",
		"q=payload.customer.id:42&state=archived",
		"q=created>24h",
		"cursor=AWpuAAAAAGZ9&limit=7",
		"limit=-1", "limit=x", "state=dead", "status=archived",
		"q=a&q=b", "q=%22", "q=state:", "",
		"q=error:%00", "q=payload.o:%22%7B%5C%22p%5C%22:[1,2.0]%7D%22",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := parseListQuery(v)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("refusal does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if err := p.Filter.Validate(); err != nil {
			t.Fatalf("accepted a filter the engine refuses: %v", err)
		}
		// The client sends filters as q: what the server accepts must
		// survive that trip.
		back, err := engine.ParseQuery(p.Filter.String())
		if err != nil {
			t.Fatalf("filter %q does not parse back: %v", p.Filter.String(), err)
		}
		if back.String() != p.Filter.String() {
			t.Fatalf("round trip changed the filter: %q → %q", p.Filter.String(), back.String())
		}
	})
}

func FuzzDecodeEnqueue(f *testing.F) {
	for _, s := range []string{
		`{"kind":"send","queue":"email","payload":{"to":"a"},"delay":"5m","timeout":"30s"}`,
		`[{"kind":"a"},{"kind":"b","tags":["x"]}]`,
		`[]`, `{"kind":"a","delay":"-1s"}`, `{"kind":"a","delay":"soon"}`, `{"kind":1}`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ps, _, err := decodeEnqueue(body)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("refusal does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if len(ps) == 0 || len(ps) > MaxEnqueueBatch {
			t.Fatalf("accepted %d jobs", len(ps))
		}
		for _, p := range ps {
			if p.Delay < 0 || p.Timeout < 0 {
				t.Fatalf("accepted a negative duration: %+v", p)
			}
		}
	})
}

// FuzzServer sends arbitrary requests to a server: none makes it fail
// (500), and none that is refused changes a job.
func FuzzServer(f *testing.F) {
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH"}
	for _, s := range []struct {
		m          uint8
		path, body string
	}{
		{0, "/api/v1/jobs?state=archived&limit=50", ""},
		{0, "/api/v1/jobs/JOB_1?include_payload=true", ""},
		{1, "/api/v1/jobs/JOB_1/retry", ""},
		{1, "/api/v1/jobs/actions", `{"action":"retry","ids":["JOB_1","JOB_2"]}`},
		{1, "/api/v1/jobs/bulk", `{"action":"retry","selector":{"state":"archived","queue":"billing"},"dry_run":true}`},
		{1, "/api/v1/jobs/bulk", `{"action":"delete","selector":{"q":"kind:charge"}}`},
		{2, "/api/v1/jobs/JOB_1/payload", `{"a":1}`},
		{3, "/api/v1/quarantine/" + pillFingerprint, ""},
		{1, "/api/v1/queues/billing/pause", `{}`},
		{1, "/api/v1/jobs", `[{"kind":"x"}]`},
		{4, "/api/v1/jobs/JOB_1", ""},
		{0, "/api/v1/jobs?q=%zz", ""},
	} {
		f.Add(s.m, s.path, s.body, s.m%2 == 0)
	}
	file := newFixtureFile(f)
	f.Fuzz(func(t *testing.T, m uint8, path, body string, viewer bool) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#") || strings.Contains(path, "/events") {
			return
		}
		if _, err := url.ParseRequestURI(path); err != nil {
			return
		}
		fx, srv := file.setup(t, ServerOptions{Tokens: testTokens, MaxBody: 1 << 16})
		before := fx.snapshot(t)
		role := engine.RoleAdmin
		if viewer {
			role = engine.RoleViewer
		}
		w := send(t, srv, req{method: methods[int(m)%len(methods)], path: path, body: body, token: tokenOf(role), key: "fuzz"})
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", methods[int(m)%len(methods)], path, body, w.Code, w.Body.String())
		}
		if w.Code >= 400 || viewer {
			if after := fx.snapshot(t); after != before {
				t.Fatalf("refused or viewer request %s %s %q (%d) changed jobs:\n%s\n%s", methods[int(m)%len(methods)], path, body, w.Code, before, after)
			}
		}
		if w.Code != http.StatusOK && w.Header().Get("Content-Type") != "application/json" && w.Body.Len() > 0 {
			t.Fatalf("non-JSON error answer: %q", w.Body.String())
		}
	})
}
