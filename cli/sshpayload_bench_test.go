package cli

import (
	"database/sql"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkSSHConsoleDeepPayload measures what opening one payload costs
// the serving process: each iteration opens a console over SSH on a store
// whose dead job holds 9,995 nested objects (about 60 KB, written
// straight to the file as a version without the nesting limit could),
// opens the job and its payload, and leaves the session open. heap-MB/
// session is the live heap each open session holds, alloc-MB/session
// what rendering allocated in all.
func BenchmarkSSHConsoleDeepPayload(b *testing.B) {
	const depth = 9995
	db := deadStore(b, 1, 0)
	raw, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	payload := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
	if _, err := raw.Exec(`UPDATE jobs SET payload = ? WHERE id = 'B-00'`, payload); err != nil {
		b.Fatal(err)
	}
	raw.Close()
	addr, key := benchSSHConsole(b, db)
	open := func() *sshTerm {
		term := openSSHTerm(b, addr, key)
		term.waitFor(" of ")
		term.keys("\r") // the sheet of the one job
		term.waitFor("shows the payload")
		term.keys("p")
		term.waitFor(" lines")
		return term
	}
	open() // warm: the store's caches, the program's first frame
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var terms []*sshTerm
	for b.Loop() {
		terms = append(terms, open())
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/(1<<20)/n, "heap-MB/session")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20)/n, "alloc-MB/session")
	runtime.KeepAlive(terms)
}
