package postgres_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/backendtest"
	"github.com/sluicehq/sluice/backend/postgres/pgtest"
	"github.com/sluicehq/sluice/engine"
)

// TestAPIConformance runs the Control checks through api.Client against
// an api.Server over an engine on PostgreSQL.
func TestAPIConformance(t *testing.T) {
	pgtest.ServerURL(t)
	backendtest.RunControl(t, backendtest.Harness{
		Name:     "postgres-via-api",
		NewStore: func(t testing.TB) backend.Store { return pgtest.New(t) },
		Control: func(t testing.TB, e *engine.Engine) engine.Control {
			srv := httptest.NewServer(api.NewServer(e, api.ServerOptions{Heartbeat: time.Second}))
			t.Cleanup(srv.Close)
			return api.NewClient(srv.URL, "", api.ClientOptions{Timeout: 20 * time.Second})
		},
	})
}
