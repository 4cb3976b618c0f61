package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/engine"
)

// diedWith returns a SQLite file holding one dead job of queue partner for
// each message, each failed once with that message.
func diedWith(t *testing.T, msgs ...string) string {
	t.Helper()
	path := sqlitetest.Path(t)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(s, engine.Config{
		Queues:       map[string]engine.QueueConfig{"partner": {Concurrency: 4}},
		PollInterval: 10 * time.Millisecond, NoMaintenance: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	type msg struct{ M string }
	if err := e.Register(engine.Kind{Name: "sync", Handler: engine.TypedHandler(func(_ context.Context, _ *engine.Job, p msg) error {
		return errors.New(p.M)
	})}); err != nil {
		t.Fatal(err)
	}
	ps := make([]engine.EnqueueParams, len(msgs))
	for i, m := range msgs {
		ps[i] = engine.EnqueueParams{ID: fmt.Sprintf("P-%02d", i), Queue: "partner", Kind: "sync", MaxAttempts: 1, Args: msg{m}}
	}
	if _, err := e.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := e.ListJobs(context.Background(), engine.ListJobsParams{Filter: engine.Filter{States: []engine.State{engine.StateArchived}}, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) == len(msgs) {
			return path
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs died", len(page.Jobs), len(msgs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestErrorsList lists a store's error groups and pastes a group's query
// into a bulk dry run, which must count exactly the group's jobs.
func TestErrorsList(t *testing.T) {
	store := "sqlite://" + diedWith(t,
		"partner api: 503 Service Unavailable (request id req_36652661)",
		"partner api: 503 Service Unavailable (request id req_aabdbebe)",
		"partner api: 503 Service Unavailable (request id req_feedcfee)",
		`invalid currency "EURO"`,
	)
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", store)

	code, out, stderr := runCLI(t, "", "errors", "list")
	if code != 0 {
		t.Fatalf("errors list: exit %d\n%s%s", code, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+QUEUE\s+KIND\s+STATUS\s+JOBS\s+LAST\s+FIRST\s+NEAR\s+ERROR\s+QUERY$`).MatchString(lines[0]) {
		t.Fatalf("errors list:\n%s", out)
	}
	row := regexp.MustCompile(`^[0-9a-f]{16}\s+partner\s+sync\s+open\s+3\s+.* ago\s+.* ago\s+0\s+partner api: <n> Service Unavailable \(request id req_<id>\)\s+('.*')$`).FindStringSubmatch(lines[1])
	if row == nil {
		t.Fatalf("first group:\n%s", lines[1])
	}
	words := shellWords(t, row[1])
	if len(words) != 1 {
		t.Fatalf("the query %s is not one shell word", row[1])
	}
	code, out, stderr = runCLI(t, "", "bulk", "retry", "-q", words[0], "--dry-run")
	if code != 0 || !strings.Contains(out, "would retry 3 job(s)") {
		t.Fatalf("bulk with the pasted query: exit %d\n%s%s", code, out, stderr)
	}

	code, out, stderr = runCLI(t, "", "errors", "list", "-o", "json")
	var groups []engine.ErrorGroup
	if code != 0 || json.Unmarshal([]byte(out), &groups) != nil || len(groups) != 2 {
		t.Fatalf("errors list -o json: exit %d\n%s%s", code, out, stderr)
	}
	if g := groups[1]; g.Pattern != `invalid currency "<str>"` || g.Count != 1 || g.Selector.ErrorPattern != g.Pattern {
		t.Fatalf("second group: %+v", g)
	}

	code, out, stderr = runCLI(t, "", "errors", "list", "--queue", "nowhere")
	if code != 0 || out != "" || !strings.Contains(stderr, "no error groups") {
		t.Fatalf("no groups: exit %d %q %q", code, out, stderr)
	}
	code, out, _ = runCLI(t, "", "errors", "list", "--queue", "nowhere", "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("no groups as json: %q", out)
	}
}

// TestErrorsListQueryPastesWithControlCharacters: on the walk, a partner
// error carrying an escape sequence (ESC ]0;owned BEL, ESC [2J) made a
// group whose QUERY, printed with ESC spelt \u001b so it never reaches
// the terminal, did not parse when pasted: the grammar knew only the
// escapes \" \\ \n \t \r. The grammar now reads \uXXXX and a selector
// writes such characters with it, so the printed query counts the group.
func TestErrorsListQueryPastesWithControlCharacters(t *testing.T) {
	store := "sqlite://" + diedWith(t,
		"partner api: 503 (request id req_aabdbebe) \x1b]0;owned\x07\x1b[2J",
		"partner api: 503 (request id req_36652661) \x1b]0;owned\x07\x1b[2J",
		"partner api: 503 (request id req_36652661)",
	)
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", store)
	code, out, stderr := runCLI(t, "", "errors", "list")
	if code != 0 || strings.ContainsRune(out, 0x1b) {
		t.Fatalf("errors list: exit %d\n%q%s", code, out, stderr)
	}
	var query string
	for _, l := range strings.Split(out, "\n") {
		if m := regexp.MustCompile(`^[0-9a-f]{16}\s+partner\s+sync\s+open\s+2\s.*\s('.*')$`).FindStringSubmatch(l); m != nil {
			query = m[1]
		}
	}
	if query == "" {
		t.Fatalf("no group of 2 in:\n%s", out)
	}
	words := shellWords(t, query)
	if len(words) != 1 {
		t.Fatalf("the query %s is not one shell word", query)
	}
	code, out, stderr = runCLI(t, "", "bulk", "retry", "-q", words[0], "--dry-run")
	if code != 0 || !strings.Contains(out, "would retry 2 job(s)") {
		t.Fatalf("bulk with the pasted query %s: exit %d\n%s%s", words[0], code, out, stderr)
	}
}

// TestErrorsResolveIgnore resolves a group and ignores another through
// the command line: errors list shows each status in its STATUS column,
// leaves the ignored group out unless --ignored, and unignore brings it
// back open. An id no group has is refused, naming it.
func TestErrorsResolveIgnore(t *testing.T) {
	store := "sqlite://" + diedWith(t,
		"partner api: 503 Service Unavailable (request id req_36652661)",
		"partner api: 503 Service Unavailable (request id req_aabdbebe)",
		`invalid currency "EURO"`,
	)
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_STORE", store)
	_, out, _ := runCLI(t, "", "errors", "list", "-o", "json")
	var groups []engine.ErrorGroup
	if err := json.Unmarshal([]byte(out), &groups); err != nil || len(groups) != 2 {
		t.Fatalf("errors list -o json: %v\n%s", err, out)
	}
	partner, currency := groups[0].ID, groups[1].ID

	code, out, stderr := runCLI(t, "", "errors", "resolve", partner, "--note", "partner fixed their gateway")
	if code != 0 || !strings.Contains(out, "error group "+partner+" (partner sync, 2 job(s)): resolved") {
		t.Fatalf("errors resolve: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "errors", "ignore", currency, "--note", "test data")
	if code != 0 || !strings.Contains(out, ": ignored") {
		t.Fatalf("errors ignore: exit %d\n%s%s", code, out, stderr)
	}
	_, out, _ = runCLI(t, "", "errors", "list")
	if !regexp.MustCompile(`(?m)^`+partner+`\s+partner\s+sync\s+resolved\s+2\s`).MatchString(out) || strings.Contains(out, currency) {
		t.Fatalf("errors list after resolve and ignore:\n%s", out)
	}
	_, out, _ = runCLI(t, "", "errors", "list", "--ignored")
	if !regexp.MustCompile(`(?m)^` + currency + `\s+partner\s+sync\s+ignored\s+1\s`).MatchString(out) {
		t.Fatalf("errors list --ignored:\n%s", out)
	}
	_, out, _ = runCLI(t, "", "errors", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &groups); err != nil || len(groups) != 1 || groups[0].Note != "partner fixed their gateway" ||
		groups[0].Status != engine.GroupResolved {
		t.Fatalf("errors list -o json after resolve: %v\n%s", err, out)
	}
	code, out, stderr = runCLI(t, "", "errors", "unignore", currency)
	if code != 0 || !strings.Contains(out, ": open") {
		t.Fatalf("errors unignore: exit %d\n%s%s", code, out, stderr)
	}
	if _, out, _ = runCLI(t, "", "errors", "list"); !regexp.MustCompile(`(?m)^` + currency + `\s+partner\s+sync\s+open\s+1\s`).MatchString(out) {
		t.Fatalf("errors list after unignore:\n%s", out)
	}
	code, _, stderr = runCLI(t, "", "errors", "resolve", "0123456789abcdef")
	if code == 0 || !strings.Contains(stderr, "error group 0123456789abcdef: not found") {
		t.Fatalf("resolve of an unknown id: exit %d\n%s", code, stderr)
	}
}
