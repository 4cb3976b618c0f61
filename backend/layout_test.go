package backend_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/backend"
)

// The stores are laid out alike: a behaviour fixed in every store starts
// with the same file in each. These tests hold the layout doc.go describes.

// stores are the directories of the stores, relative to this package.
var stores = []string{"sqlite", "postgres", "redis"}

// sections says which file of every store holds each method of the
// contract, in the interfaces' order (Store, ControlStore, WaitStore,
// IdempotencyStore, ArchiveStore, DurabilityWarner). doc.go has the same
// table.
var sections = []struct {
	file    string
	methods []string
}{
	{"store.go", []string{"Backend", "Capabilities", "Close", "Now", "DurabilityWarnings"}},
	{"insert.go", []string{"JobInsertMany"}},
	{"get.go", []string{"JobGetByID", "JobEventList"}},
	{"claim.go", []string{"JobClaim"}},
	{"finish.go", []string{"JobCompleteMany", "JobFinish"}},
	{"workflow.go", []string{"JobCheckpoint"}},
	{"leases.go", []string{"JobLeaseRenew", "JobListExpiredLeases"}},
	{"schedule.go", []string{"JobScheduleDue"}},
	{"retention.go", []string{"JobDeleteExpired"}},
	{"fingerprints.go", []string{"FingerprintGet", "FingerprintList", "FingerprintRelease"}},
	{"workers.go", []string{"WorkerHeartbeat", "WorkerDelete"}},
	{"leader.go", []string{"LeaderAttempt", "LeaderResign"}},
	{"list.go", []string{"JobListPage", "JobCountMatching", "JobCountUniqueHeld"}},
	{"counts.go", []string{"JobCountByQueue", "JobCountReconcile"}},
	{"errgroups.go", []string{"JobErrorGroups", "ErrorGroupTriageSet", "ErrorGroupTriageList"}},
	{"actions.go", []string{"JobAction", "JobUpdatePayload", "JobRetryCopy"}},
	{"fork.go", []string{"JobFork"}},
	{"operations.go", []string{"OperationInsert", "OperationGet", "OperationList", "OperationCancel",
		"OperationClaim", "OperationProcessBatch", "OperationFinish"}},
	{"canary.go", []string{"OperationCanarySet", "OperationResume"}},
	{"queues.go", []string{"QueueList", "QueuePause", "QueueResume"}},
	{"wait.go", []string{"SignalSend", "SignalList", "SignalConsume", "JobWake"}},
	{"idempotency.go", []string{"IdempotencyClaim", "IdempotencyRenew", "IdempotencyComplete",
		"IdempotencyRelease", "IdempotencyDeleteExpired"}},
	{"archive.go", []string{"ArchiveList", "ArchiveGet"}},
	{"limits.go", []string{"LimitList", "LimitSet"}},
	{"periodic.go", []string{"ScheduleUpsert", "ScheduleList", "ScheduleGet", "SchedulePause",
		"ScheduleResume", "ScheduleTrigger", "ScheduleMarkFired"}},
	{"audit.go", []string{"AuditAppend", "AuditList", "AuditDeleteExpired"}},
}

// contract are the interfaces whose every method has a section.
// backend.Notifier is not among them: each store wakes workers its own way
// (listen.go, pubsub.go), in a file of its own.
var contract = []reflect.Type{
	reflect.TypeFor[backend.Store](),
	reflect.TypeFor[backend.ControlStore](),
	reflect.TypeFor[backend.WaitStore](),
	reflect.TypeFor[backend.IdempotencyStore](),
	reflect.TypeFor[backend.ArchiveStore](),
	reflect.TypeFor[backend.LimitStore](),
	reflect.TypeFor[backend.DurabilityWarner](),
	reflect.TypeFor[backend.ScheduleStore](),
	reflect.TypeFor[backend.AuditStore](),
}

// storeOnly are the files one or two stores have and the others do not,
// each with why. Every other non-test file is in all three stores.
var storeOnly = map[string]map[string]string{
	"sqlite": {
		"listjson.go": "decodes the tags and errors JSON columns without encoding/json",
		"perms.go":    "creates the database file readable by its owner only",
		"scan.go":     "scans SQL rows into jobs (Redis decodes hashes in codec.go)",
	},
	"postgres": {
		"archive.go": "ArchiveStore: only PostgreSQL keeps a cold archive of deleted jobs",
		"listen.go":  "LISTEN/NOTIFY wake-ups (backend.Notifier)",
		"scan.go":    "scans SQL rows into jobs (Redis decodes hashes in codec.go)",
		"tx.go":      "EnqueueTx: inserts inside the caller's pgx transaction",
	},
	"redis": {
		"codec.go":  "encodes and decodes hash fields and packed script replies",
		"fields.go": "the one table of hash field names the scripts and Go share",
		"liblog.go": "routes go-redis's own log lines to the store's logger",
		"lua.go":    "the Lua library every script is built on",
		"pubsub.go": "pub/sub wake-ups (backend.Notifier)",
	},
}

// sourceFiles lists the non-test .go files of dir, sorted.
func sourceFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			out = append(out, n)
		}
	}
	return out
}

// TestStoresLaidOutAlike fails when a store has a file the others lack
// (and storeOnly does not list), or a listed file is gone.
func TestStoresLaidOutAlike(t *testing.T) {
	have := map[string]map[string]bool{} // file -> stores with it (not store-only)
	for _, st := range stores {
		files := sourceFiles(t, st)
		for f, why := range storeOnly[st] {
			if !slices.Contains(files, f) {
				t.Errorf("%s/%s is listed in storeOnly (%s) but does not exist; drop it from the list", st, f, why)
			}
		}
		for _, f := range files {
			if _, only := storeOnly[st][f]; only {
				continue
			}
			if have[f] == nil {
				have[f] = map[string]bool{}
			}
			have[f][st] = true
		}
	}
	var names []string
	for f := range have {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		var missing []string
		for _, st := range stores {
			if !have[f][st] {
				missing = append(missing, st)
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s is in some stores but not in %s: give every store the file, or list it in storeOnly with why",
				f, strings.Join(missing, ", "))
		}
	}
}

// TestContractMethodsInTheirSection fails when a store defines a contract
// method outside its section's file, or a contract method has no section.
func TestContractMethodsInTheirSection(t *testing.T) {
	fileOf := map[string]string{}
	for _, s := range sections {
		for _, m := range s.methods {
			fileOf[m] = s.file
		}
	}
	for _, it := range contract {
		for i := range it.NumMethod() {
			if m := it.Method(i).Name; fileOf[m] == "" {
				t.Errorf("%s.%s has no section: add it to sections here and to the table in doc.go", it.Name(), m)
			}
		}
	}
	for _, st := range stores {
		fset := token.NewFileSet()
		for _, f := range sourceFiles(t, st) {
			af, err := parser.ParseFile(fset, filepath.Join(st, f), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || !onStore(fd.Recv) {
					continue
				}
				if want := fileOf[fd.Name.Name]; want != "" && want != f {
					t.Errorf("%s: (*Store).%s is in %s; its section is %s", st, fd.Name.Name, f, want)
				}
			}
		}
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sections {
		if !bytes.Contains(doc, []byte(s.file)) {
			t.Errorf("doc.go's table does not name %s", s.file)
		}
	}
}

// onStore reports whether a method's receiver is the store's Store type.
func onStore(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.Name == "Store"
}

// maxLines is the most lines a non-test, non-generated .go file has.
const maxLines = 1000

// overLong are the files past maxLines before the limit came, each at most
// the length it had then: it may shrink, not grow. An entry goes when its
// file is split.
var overLong = map[string]int{}

// TestNoFileOverLong fails naming every non-test .go file of the module
// (other modules such as bench/peers and generated files aside) longer
// than maxLines.
func TestNoFileOverLong(t *testing.T) {
	root := ".."
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			n := d.Name()
			if rel != "." && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // another module (bench/peers)
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		n := bytes.Count(src, []byte("\n"))
		if len(src) > 0 && src[len(src)-1] != '\n' {
			n++
		}
		limit, known := overLong[rel]
		switch {
		case known:
			seen[rel] = true
			if n > limit {
				t.Errorf("%s has %d lines, more than its %d when the limit of %d came: split it rather than grow it",
					rel, n, limit, maxLines)
			} else if n <= maxLines {
				t.Errorf("%s has %d lines, within the limit: drop it from overLong", rel, n)
			}
		case n > maxLines:
			t.Errorf("%s has %d lines, more than %d: split it by section", rel, n, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range overLong {
		if !seen[f] {
			t.Errorf("%s is listed in overLong but is not in the module; drop it", f)
		}
	}
}
