package api_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// boundedControl answers lists and counts as a store at its scan budget
// does (backend/redis TestBoundedScan makes real ones); SQLite never is.
type boundedControl struct{ engine.Control }

var testScan = &engine.ScanReport{Bounded: true, Scanned: 10000, Total: 1234567}

func (c boundedControl) ListJobs(ctx context.Context, p engine.ListJobsParams) (*engine.JobPage, error) {
	page, err := c.Control.ListJobs(ctx, p)
	if err != nil {
		return nil, err
	}
	page.Scan, page.Next = testScan, engine.Cursor{ID: "x", Dir: engine.CursorNext}.Encode()
	return page, nil
}

func (c boundedControl) CountJobs(ctx context.Context, p engine.CountJobsParams) (*engine.JobCounts, error) {
	n, err := c.Control.CountJobs(ctx, p)
	if err != nil {
		return nil, err
	}
	n.Capped = append(n.Capped, engine.StateArchived)
	n.Scans = map[engine.State]*engine.ScanReport{engine.StateArchived: testScan}
	return n, nil
}

// TestBoundedScanContract: a bounded list and count match the spec, and
// api.Client reads the scan back.
func TestBoundedScanContract(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	doc.Servers = openapi3.Servers{{URL: "http://contract.test"}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(sqlitetest.New(t), engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api.NewServer(boundedControl{e}, api.ServerOptions{}))
	t.Cleanup(hs.Close)
	for _, c := range []contractCase{
		{name: "bounded list", method: "GET", path: "/api/v1/jobs?state=archived&q=payload.customer:42", want: 200},
		{name: "bounded list, bad limit", method: "GET", path: "/api/v1/jobs?limit=0x", want: 400},
		{name: "bounded count", method: "GET", path: "/api/v1/jobs/counts/filter?state=archived&q=payload.customer:42", want: 200},
	} {
		if _, status, err := sendContractCase(t, router, hs.URL, c); err != nil || status != c.want {
			t.Errorf("%s: %d %v", c.name, status, err)
		}
	}
	cl := api.NewClient(hs.URL, "", api.ClientOptions{})
	page, err := cl.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}})
	if err != nil {
		t.Fatal(err)
	}
	if page.Scan == nil || *page.Scan != (engine.ScanReport{Bounded: true, Scanned: 10000, Total: 1234567}) {
		t.Fatalf("client read scan %+v", page.Scan)
	}
}
