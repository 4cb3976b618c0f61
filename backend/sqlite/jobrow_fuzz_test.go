package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite"
	"github.com/sluicehq/sluice/sluicetype"
)

// FuzzStoredJobDecode writes arbitrary text into a stored job's JSON
// columns (tags, errors) of a real SQLite file, as a damaged or
// hand-edited database would hold, and reads the job back through the
// store: by id (the errors in full) and by list (the latest error only).
// Neither may panic; where encoding/json reads both columns the store
// must give the same tags and errors, and where it does not the read
// fails with an error naming the job, never a half-decoded job. The
// seeds run as an ordinary test.
func FuzzStoredJobDecode(f *testing.F) {
	ctx := context.Background()
	path := filepath.Join(f.TempDir(), "fuzz.db")
	store, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	res, err := store.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: []*backend.JobInsertParams{{
		ID: "fuzz-job", Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`), MaxAttempts: 3,
	}}})
	if err != nil || res[0].Err != nil {
		f.Fatalf("insert: %v %v", err, res)
	}
	// synchronous(OFF) on this connection only: the fuzzer writes a row per
	// input, and what it tests is the read.
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { raw.Close() })

	at := time.Date(2026, 11, 30, 1, 22, 21, 905364298, time.UTC)
	good, _ := json.Marshal([]sluicetype.AttemptError{
		{Attempt: 1, At: at, Worker: "w/1", Message: "boom \x1b[2J \u2028 \xff"},
		{Attempt: 2, Crash: true, At: at.Add(time.Second), Message: "panic: x", Trace: "goroutine 1"},
	})
	for _, s := range [][2]string{
		{`[]`, `[]`}, {`["a","b"]`, string(good)}, {`["\u00e9",""]`, `[{"attempt":1}]`},
		{`null`, `null`}, {`[1]`, `[{"attempt":"1"}]`}, {`["a"`, `[{"attempt":1},{"attempt":2}`},
		{`[`, `[{"message":"},{\"attempt\":9}"},{"attempt":2}]`}, {`{}`, `[{"at":"2026-13-01T00:00:00Z"}]`},
		{"[\"\xff\"]", `[{"attempt":1e400}]`}, {``, ``},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, tags, errs string) {
		if _, err := raw.ExecContext(ctx, `UPDATE jobs SET tags = ?, errors = ? WHERE id = 'fuzz-job'`, tags, errs); err != nil {
			t.Skipf("the column refuses the value: %v", err) // NOT NULL, and nothing else
		}
		var wantTags []string
		var wantErrs []sluicetype.AttemptError
		tagsOK := tags == "" || json.Unmarshal([]byte(tags), &wantTags) == nil
		errsOK := errs == "" || json.Unmarshal([]byte(errs), &wantErrs) == nil

		j, err := store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: "fuzz-job"})
		switch {
		case tagsOK && errsOK && err != nil:
			t.Fatalf("tags %q errors %q: encoding/json reads both, the store says %v", tags, errs, err)
		case !(tagsOK && errsOK) && err == nil:
			t.Fatalf("tags %q errors %q: encoding/json refuses one, the store decoded %#v %#v", tags, errs, j.Tags, j.Errors)
		case err != nil:
			if errors.Is(err, sluicetype.ErrNotFound) {
				t.Fatalf("tags %q errors %q: the job is not found: %v", tags, errs, err)
			}
			return
		}
		if len(wantTags) == 0 {
			wantTags = nil
		}
		if len(wantErrs) == 0 {
			wantErrs = nil
		}
		if !reflect.DeepEqual(j.Tags, wantTags) {
			t.Fatalf("tags %q: store %#v, encoding/json %#v", tags, j.Tags, wantTags)
		}
		if !sameErrors(j.Errors, wantErrs) {
			t.Fatalf("errors %q:\nstore        %#v\nencoding/json %#v", errs, j.Errors, wantErrs)
		}

		page, err := store.JobListPage(ctx, &backend.JobListPageParams{Limit: 10})
		if err != nil {
			t.Fatalf("list with tags %q errors %q: %v", tags, errs, err)
		}
		if len(page) != 1 {
			t.Fatalf("list: %d jobs, want 1", len(page))
		}
		if wantErrs != nil {
			wantErrs = wantErrs[len(wantErrs)-1:]
		}
		if l := page[0].Errors; len(l) > 1 || !sameErrors(l, wantErrs) {
			t.Fatalf("list, errors %q: latest %#v, want %#v", errs, l, wantErrs)
		}
	})
}

// sameErrors compares error lists with times as instants and offsets.
func sameErrors(a, b []sluicetype.AttemptError) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		_, xo := x.At.Zone()
		_, yo := y.At.Zone()
		if !x.At.Equal(y.At) || xo != yo {
			return false
		}
		x.At, y.At = time.Time{}, time.Time{}
		if x != y {
			return false
		}
	}
	return true
}
