package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// TestAuditListOnStoreAndAPI: the command line's actions are recorded
// with its surface, and sluice audit list reads them back, filtered by
// -q, as a table or as JSON, straight on the store and over the API
// (where a refused action shows with its reason).
func TestAuditListOnStoreAndAPI(t *testing.T) {
	path := deadStore(t, 2, 1)
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", "sqlite://"+path)
	t.Setenv("SLUICE_ACTOR", "maya")
	if code, out, stderr := runCLI(t, "", "jobs", "retry", "B-00"); code != 0 {
		t.Fatalf("jobs retry: exit %d %s %s", code, out, stderr)
	}
	if code, out, stderr := runCLI(t, "", "queues", "pause", "email"); code != 0 {
		t.Fatalf("queues pause: exit %d %s %s", code, out, stderr)
	}
	code, out, stderr := runCLI(t, "", "audit", "list")
	if code != 0 || !strings.Contains(out, "ACTION") || !strings.Contains(out, "job B-00") || !strings.Contains(out, "pause") ||
		!strings.Contains(out, "cli") {
		t.Fatalf("audit list: exit %d %s %s", code, out, stderr)
	}
	var page engine.AuditPage
	code, out, stderr = runCLI(t, "", "audit", "list", "-q", "action:retry since:1h", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Records) != 1 {
		t.Fatalf("audit list -q action:retry -o json: exit %d %s %s", code, out, stderr)
	}
	if r := page.Records[0]; r.Actor != "maya" || r.Surface != engine.SurfaceCLI || r.JobID != "B-00" || r.Result != engine.AuditOK {
		t.Fatalf("the retry's record: %+v", r)
	}
	if code, _, stderr = runCLI(t, "", "audit", "list", "-q", "who:maya"); code != 1 || !strings.Contains(stderr, "unknown key") {
		t.Fatalf("a bad query: exit %d %s", code, stderr)
	}

	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{NoMaintenance: true, MaintenanceInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{Tokens: map[string]api.Identity{
		"viewer-0123456789abcdef": {Name: "dash", Role: engine.RoleViewer},
	}}))
	defer hs.Close()
	t.Setenv("SLUICE_STORE", "")
	t.Setenv("SLUICE_API", hs.URL)
	t.Setenv("SLUICE_TOKEN", "viewer-0123456789abcdef")
	if code, _, _ = runCLI(t, "", "jobs", "retry", "B-01"); code != 1 {
		t.Fatalf("a viewer's retry: exit %d", code)
	}
	code, out, stderr = runCLI(t, "", "audit", "list", "-q", "actor:dash/maya", "-o", "json")
	page = engine.AuditPage{}
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Records) != 1 {
		t.Fatalf("audit list over the API: exit %d %s %s", code, out, stderr)
	}
	if r := page.Records[0]; r.Result != "forbidden" || r.Surface != engine.SurfaceCLI || r.Role != engine.RoleViewer || r.Source != "" {
		t.Fatalf("the refused retry as a viewer reads it: %+v", r)
	}
}
