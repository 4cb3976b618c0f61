package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNoTokensRefusesForeignHost: a server without tokens (everyone is
// admin on loopback) answers over a real connection only requests whose
// Host names this machine. A page on evil.example whose name was
// rebound to 127.0.0.1 sends Host: evil.example and is refused before
// any route runs; with tokens the Host does not matter, since the token
// decides.
func TestNoTokensRefusesForeignHost(t *testing.T) {
	t.Parallel()
	fx, srv := setup(t, ServerOptions{})
	before := fx.snapshot(t)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	do := func(method, host, path string) *http.Response {
		t.Helper()
		r, err := http.NewRequest(method, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Host = host
		r.Header.Set(IdempotencyHeader, "k-"+host+path)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "10.0.0.5:8080", "localhost.evil.example"} {
		for _, rt := range []struct{ method, path string }{
			{"GET", "/api/v1/jobs?state=archived"},
			{"GET", "/api/v1/jobs/JOB_1?include_payload=true"},
			{"GET", "/api/v1/meta"},
			{"GET", "/metrics"},
			{"POST", "/api/v1/jobs/JOB_1/retry"},
		} {
			res := do(rt.method, host, rt.path)
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("Host %s: %s %s answered %d, want 403", host, rt.method, rt.path, res.StatusCode)
			}
		}
	}
	if after := fx.snapshot(t); after != before {
		t.Fatalf("a request to a foreign host changed something:\n%s\nafter:\n%s", before, after)
	}
	res := do("GET", "evil.example", "/api/v1/meta")
	if b, err := io.ReadAll(res.Body); err != nil || !strings.Contains(string(b), "loopback") {
		t.Fatalf("the refusal does not say why: %s %v", b, err)
	}
	for _, host := range []string{strings.TrimPrefix(ts.URL, "http://"), "127.0.0.1", "localhost:8080", "LOCALHOST", "[::1]:8080", "app.localhost:9", "127.0.0.2"} {
		if res := do("GET", host, "/api/v1/meta"); res.StatusCode != http.StatusOK {
			t.Errorf("Host %s: meta answered %d, want 200", host, res.StatusCode)
		}
	}

	// With tokens, the token decides, whatever the Host.
	srv = NewServer(fx.eng, ServerOptions{Tokens: testTokens})
	ts2 := httptest.NewServer(srv)
	t.Cleanup(ts2.Close)
	r, _ := http.NewRequest("GET", ts2.URL+"/api/v1/meta", nil)
	r.Host = "sluice.example.com"
	r.Header.Set("Authorization", "Bearer "+tokenOf("viewer"))
	res2, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if res2.StatusCode != http.StatusOK {
		t.Fatalf("with tokens, Host sluice.example.com: %d", res2.StatusCode)
	}
}
