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

// warnedControl is an engine whose Meta carries the durability warnings
// a Redis store gives (backend/redis TestDurabilityWarningsPrivate serves
// them from real servers); SQLite itself has none.
type warnedControl struct {
	engine.Control
}

func (c warnedControl) Meta(ctx context.Context) (*engine.Meta, error) {
	m, err := c.Control.Meta(ctx)
	if err != nil {
		return nil, err
	}
	m.Warnings = []string{"the server keeps nothing on disk (appendonly no, save empty): a restart loses every job"}
	return m, nil
}

// TestMetaWarningsContract: GET /meta with warnings matches the spec,
// which declares the field, and api.Client reads them back.
func TestMetaWarningsContract(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	meta := doc.Paths.Find("/api/v1/meta").Get.Responses.Status(200).Value.Content.Get("application/json").Schema.Value
	if meta.Properties["warnings"] == nil {
		t.Fatal("openapi.yaml: GET /meta declares no warnings")
	}
	doc.Servers = openapi3.Servers{{URL: "http://contract.test"}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(sqlitetest.New(t), engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	ctl := warnedControl{e}
	hs := httptest.NewServer(api.NewServer(ctl, api.ServerOptions{Tokens: map[string]api.Identity{tokViewer: {Name: "vera", Role: engine.RoleViewer}}}))
	t.Cleanup(hs.Close)
	for _, c := range []contractCase{
		{name: "meta with warnings", method: "GET", path: "/api/v1/meta", token: tokViewer, want: 200},
		{name: "meta with warnings, no token", method: "GET", path: "/api/v1/meta", want: 401},
	} {
		if _, status, err := sendContractCase(t, router, hs.URL, c); err != nil || status != c.want {
			t.Errorf("%s: %d %v", c.name, status, err)
		}
	}
	m, err := api.NewClient(hs.URL, tokViewer, api.ClientOptions{}).Meta(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Warnings) != 1 || m.Warnings[0] == "" {
		t.Fatalf("client read warnings %q", m.Warnings)
	}
}
