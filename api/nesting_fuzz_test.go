package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// FuzzWireNesting sends each route that takes JSON a job keeps (enqueue's
// payload and metadata, payload edit, retry with input, a replay's
// result, a signal) a value nested depth levels deep, to a server over a
// real engine on SQLite: past engine.MaxJSONDepth it is refused with a
// 4xx (400 where the route gets to the value), never taken and never a
// 5xx; within it, never a 5xx.
func FuzzWireNesting(f *testing.F) {
	for _, d := range []uint16{0, 1, engine.MaxJSONDepth - 1, engine.MaxJSONDepth, engine.MaxJSONDepth + 1, 999, 1000, 1001, 10001} {
		for r := range uint8(6) {
			f.Add(d, r, false)
		}
	}
	e, err := engine.New(sqlitetest.New(f), engine.Config{NoMaintenance: true})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := e.Enqueue(context.Background(), engine.EnqueueParams{ID: "j", Queue: "idle", Kind: "k"}); err != nil {
		f.Fatal(err)
	}
	srv := api.NewServer(e, api.ServerOptions{})
	n := 0
	f.Fuzz(func(t *testing.T, depth uint16, route uint8, array bool) {
		d := int(depth) % 12000
		open, close := `{"a":`, "}"
		if array {
			open, close = "[", "]"
		}
		v := strings.Repeat(open, d) + "1" + strings.Repeat(close, d)
		obj := `{"v":` + v + `}` // a payload must be an object: one level more
		n++
		key := fmt.Sprintf("k-%d", n)
		var method, path, body string
		switch route % 6 {
		case 0:
			method, path, body = "POST", "/api/v1/jobs", `{"id":"`+key+`","queue":"idle","kind":"k","payload":`+obj+`}`
		case 1:
			method, path, body = "POST", "/api/v1/jobs", `{"id":"`+key+`","queue":"idle","kind":"k","metadata":`+obj+`}`
		case 2:
			method, path, body = "PUT", "/api/v1/jobs/j/payload", obj
		case 3:
			method, path, body = "POST", "/api/v1/jobs/j/retry-with-input", `{"payload":`+obj+`}`
		case 4:
			method, path, body = "POST", "/api/v1/jobs/j/replay", `{"step":2,"result":`+v+`}`
		default:
			method, path, body = "POST", "/api/v1/jobs/j/signals/go", v
		}
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = "127.0.0.1:8080" // a server without tokens refuses httptest's example.com
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.IdempotencyHeader, key)
		if route%6 == 2 {
			j, err := e.GetJob(context.Background(), "j", false)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("If-Match", fmt.Sprintf("%q", fmt.Sprint(j.Job.Version)))
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		// Payloads and metadata are the object around v, a level deeper;
		// a replay's result and a signal's payload are v itself.
		deep := d+1 > engine.MaxJSONDepth
		if route%6 >= 4 {
			deep = d > engine.MaxJSONDepth
		}
		switch {
		case rec.Code >= 500:
			t.Fatalf("%s %s with %d levels: %d %s", method, path, d, rec.Code, rec.Body)
		case deep && rec.Code < 400:
			t.Fatalf("%s %s with %d levels, past the limit of %d: taken, %d %s", method, path, d, engine.MaxJSONDepth, rec.Code, rec.Body)
		case deep && route%6 < 4 && rec.Code != http.StatusBadRequest:
			t.Fatalf("%s %s with %d levels: %d %s, want 400", method, path, d, rec.Code, rec.Body)
		}
	})
}
