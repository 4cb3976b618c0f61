package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// The shape of the module: which package may import which (ARCHITECTURE.md,
// "Imports point one way"), and the seam between the engine a user calls
// and the store contract. These tests read the packages with `go list` and
// go/parser, so a change that breaks the shape fails here, named.

const module = "github.com/sluicehq/sluice"

// importRules lists, for each package, the packages of this module it may
// import (its non-test files). A package not listed may import any.
var importRules = map[string][]string{
	"sluicetype":          {"internal/jsonw"},
	"backend":             {"sluicetype"},
	"internal/outage":     {"sluicetype"},
	"internal/commithook": {},
	"engine":              {"backend", "sluicetype", "internal/outage"},
	"backend/sqlite":      {"backend", "sluicetype", "internal/jsonw", "internal/redact", "internal/outage", "internal/commithook"},
	"backend/postgres":    {"backend", "sluicetype", "internal/jsonw", "internal/redact", "internal/outage", "internal/commithook"},
	"backend/redis":       {"backend", "sluicetype", "internal/jsonw", "internal/redact", "internal/outage"},
	"backend/backendtest": {"backend", "sluicetype", "engine", "internal/outage", "internal/commithook"},
	"api":                 {"engine", "sluicetype", "internal/jsonw", "internal/redact", "internal/outage"},
	"api/apimetrics":      {"api", "engine", "internal/outage"},
	"tui":                 {"engine", "keymap", "themes", "internal/termtext"},
	"keymap":              {"internal/suggest"},
	"themes":              {},
	"internal/jsonw":      {},
	"internal/suggest":    {},
	"internal/termtext":   {},
	"internal/redact":     {},
	"sluiceotel":          {"engine"},
	"internal/otelsetup":  {"engine", "sluiceotel", "internal/redact"},
}

// notShipped are the tools the sluice binary must not link: benchmarks,
// fault harnesses, private servers, generators and conformance helpers.
var notShipped = []string{
	"internal/bench", "internal/chaos", "internal/pgcluster", "internal/testworker",
	"internal/aliasgen", "backend/backendtest", "backend/sqlite/sqlitetest",
	"backend/postgres/pgtest", "backend/redis/redistest", "internal/otlptest",
}

func goList(t *testing.T, args ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goTool, append([]string{"list"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestImportArrows: every package imports only what importRules allows it;
// the stores import the contract (backend, sluicetype) and never engine.
func TestImportArrows(t *testing.T) {
	out := goList(t, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	seen := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		allowed, ruled := importRules[pkg]
		if !ruled {
			continue
		}
		seen[pkg] = true
		for _, imp := range f[1:] {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s; ARCHITECTURE.md allows it %v", pkg, dep, allowed)
			}
		}
	}
	for pkg := range importRules {
		if !seen[pkg] {
			t.Errorf("importRules names %s, which go list did not list", pkg)
		}
	}
}

// TestShippedBinaryLinksNoTools: `go list -deps .` (the sluice binary)
// lists none of the benchmark, chaos, cluster and conformance tools.
func TestShippedBinaryLinksNoTools(t *testing.T) {
	deps := strings.Fields(goList(t, "-deps", "."))
	for _, tool := range notShipped {
		if slices.Contains(deps, module+"/"+tool) {
			t.Errorf("the sluice binary links %s", tool)
		}
	}
	for _, want := range []string{"engine", "backend/sqlite", "tui"} {
		if !slices.Contains(deps, module+"/"+want) {
			t.Errorf("go list -deps . has no %s: the check reads the wrong list", want)
		}
	}
}

// TestNoOpenTelemetryInEngine: tracing is opt-in (package sluiceotel):
// `go list -deps` of the packages a program embeds (engine, api, tui,
// the stores) lists no OpenTelemetry package, while sluiceotel's does,
// so the check reads the right list. The sluice binary links it for
// serve's and worker's export, and then only through sluiceotel and
// internal/otelsetup: no other package of the module imports
// OpenTelemetry, so the engine's Interceptor stays the only seam.
func TestNoOpenTelemetryInEngine(t *testing.T) {
	const otel = "go.opentelemetry.io/"
	for _, pkg := range []string{"./engine", "./api", "./tui", "./backend/sqlite", "./backend/postgres", "./backend/redis"} {
		for _, dep := range strings.Fields(goList(t, "-deps", pkg)) {
			if strings.HasPrefix(dep, otel) {
				t.Errorf("go list -deps %s lists %s", pkg, dep)
			}
		}
	}
	if !slices.ContainsFunc(strings.Fields(goList(t, "-deps", "./sluiceotel")), func(d string) bool { return strings.HasPrefix(d, otel) }) {
		t.Error("go list -deps ./sluiceotel lists no OpenTelemetry package: the check reads the wrong list")
	}
	importers := map[string]bool{}
	out := goList(t, "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".")
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if f[0] != module && !strings.HasPrefix(f[0], module+"/") {
			continue
		}
		if slices.ContainsFunc(f[1:], func(d string) bool { return strings.HasPrefix(d, otel) }) {
			importers[strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")] = true
		}
	}
	for pkg := range importers {
		if pkg != "sluiceotel" && pkg != "internal/otelsetup" {
			t.Errorf("%s imports OpenTelemetry; only sluiceotel and internal/otelsetup may", pkg)
		}
	}
	if !importers["internal/otelsetup"] {
		t.Error("the sluice binary does not link internal/otelsetup: the check reads the wrong list")
	}
}

// exportedNames is the exported package-level names of the non-test
// files in dir.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// nameKey is a name's words, lower case, singular, without "job", in
// order: ListJobsParams and JobListPageParams share the key "list params".
func nameKey(name string) string {
	var words []string
	rs := []rune(name)
	start := 0
	for i := 1; i <= len(rs); i++ {
		if i < len(rs) {
			lowerToUpper := unicode.IsLower(rs[i-1]) && unicode.IsUpper(rs[i])
			acronymEnd := i+1 < len(rs) && unicode.IsUpper(rs[i-1]) && unicode.IsUpper(rs[i]) && unicode.IsLower(rs[i+1])
			digit := unicode.IsDigit(rs[i]) != unicode.IsDigit(rs[i-1])
			if !lowerToUpper && !acronymEnd && !digit {
				continue
			}
		}
		w := strings.ToLower(string(rs[start:i]))
		start = i
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = strings.TrimSuffix(w, "s")
		}
		if w == "job" {
			continue
		}
		words = append(words, w)
	}
	sort.Strings(words)
	return strings.Join(words, " ")
}

func TestNameKey(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"ListJobsParams", "JobListParams"},
		{"CountJobsParams", "JobCountParams"},
		{"RetryWithInputParams", "JobRetryWithInputParams"},
		{"Store", "Store"},
	} {
		if nameKey(tc.a) != nameKey(tc.b) {
			t.Errorf("nameKey(%s) = %q, nameKey(%s) = %q: a permutation goes unseen", tc.a, nameKey(tc.a), tc.b, nameKey(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"JobPage", "JobPageParams"},
		{"ErrorGroup", "JobErrorGroupsParams"},
		{"ActionFrom", "ActionSpec"},
	} {
		if nameKey(tc.a) == nameKey(tc.b) {
			t.Errorf("nameKey(%s) = nameKey(%s) = %q: different names collide", tc.a, tc.b, nameKey(tc.a))
		}
	}
}

// TestContractApartFromEngine: no name engine exports is the same words as
// a name of the store contract in another order (or the same name): a
// reader of `go doc ./engine` meets what a user calls, and a store author
// reading package backend is never left to guess which of two twins a
// method takes.
func TestContractApartFromEngine(t *testing.T) {
	contract := map[string]string{}
	for _, n := range exportedNames(t, "backend") {
		contract[nameKey(n)] = n
	}
	if len(contract) < 50 {
		t.Fatalf("package backend exports %d names: the check reads the wrong directory", len(contract))
	}
	for _, n := range exportedNames(t, "engine") {
		if c, ok := contract[nameKey(n)]; ok {
			t.Errorf("engine.%s and backend.%s are the same words: rename one", n, c)
		}
	}
}

// TestEngineNamesEverySharedType: engine/sluicetype.go is what
// internal/aliasgen writes from package sluicetype today, so every shared
// type a program reaches as engine.X is there and none is stale.
func TestEngineNamesEverySharedType(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), "sluicetype.go")
	args := []string{"run", "./internal/aliasgen", "sluicetype", module + "/sluicetype", "engine", "-o", out}
	args = append(args, aliasSkips(t)...)
	if b, err := exec.Command(goTool, args...).CombinedOutput(); err != nil {
		t.Fatalf("aliasgen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("engine/sluicetype.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("engine/sluicetype.go is not what aliasgen writes now: run go generate ./engine")
	}
}

// aliasSkips reads the names engine's go:generate line leaves out.
func aliasSkips(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("engine/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "//go:generate "); ok {
			_, skips, ok := strings.Cut(rest, "-o sluicetype.go")
			if !ok {
				t.Fatalf("engine/doc.go's go:generate line has no -o sluicetype.go: %s", line)
			}
			return strings.Fields(skips)
		}
	}
	t.Fatal("engine/doc.go has no go:generate line")
	return nil
}
