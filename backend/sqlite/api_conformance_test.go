package sqlite_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/sluicetype"
)

// TestAPIConformance runs the Control checks of the conformance suite
// through api.Client against an api.Server over the engine: the remote
// path must behave as the embedded one.
func TestAPIConformance(t *testing.T) {
	backendtest.RunControl(t, backendtest.Harness{
		Name:     "sqlite-via-api",
		NewStore: func(t testing.TB) backend.Store { return sqlitetest.New(t) },
		Control: func(t testing.TB, e *engine.Engine) engine.Control {
			srv := httptest.NewServer(api.NewServer(e, api.ServerOptions{Heartbeat: time.Second}))
			t.Cleanup(srv.Close)
			return api.NewClient(srv.URL, "", api.ClientOptions{Timeout: 20 * time.Second})
		},
	})
}

// TestLocalAPIConformance runs the same checks through api.Server.Local,
// the in-process client consoles served over SSH use: no socket, the
// identity given in place of a token, on a server that has tokens.
func TestLocalAPIConformance(t *testing.T) {
	backendtest.RunControl(t, backendtest.Harness{
		Name:     "sqlite-via-local-api",
		NewStore: func(t testing.TB) backend.Store { return sqlitetest.New(t) },
		Control: func(t testing.TB, e *engine.Engine) engine.Control {
			srv := api.NewServer(e, api.ServerOptions{
				Heartbeat: time.Second,
				Tokens:    map[string]api.Identity{"a-token-nobody-sends-0123456789": {Name: "other", Role: sluicetype.RoleViewer}},
			})
			return srv.Local(api.Identity{Name: "maya", Role: sluicetype.RoleAdmin}, api.ClientOptions{Timeout: 20 * time.Second})
		},
	})
}
