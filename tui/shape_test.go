package tui

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The console is made of components: the root Model keeps routing,
// layout and the stale-answer machinery, and each screen and dialog owns
// its state. These checks keep it so: a field added to the root, or a
// file grown back into a grab bag, fails here and names itself.

const (
	// maxRootFields bounds Model's fields, counting those of any struct
	// it embeds: new state belongs to the component that shows it.
	maxRootFields = 24
	// maxFileLines bounds every non-test file of the package.
	maxFileLines = 600
)

// longFiles may pass maxFileLines, each under its own bound: the windowed
// job list is one piece.
var longFiles = map[string]int{"jobs.go": 900}

func TestRootModelStaysSmall(t *testing.T) {
	fset := token.NewFileSet()
	structs := map[string]*ast.StructType{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	model, ok := structs["Model"]
	if !ok {
		t.Fatal("no Model struct in the package: the check reads the wrong directory")
	}
	var fields []string
	var count func(st *ast.StructType)
	count = func(st *ast.StructType) {
		for _, f := range st.Fields.List {
			if len(f.Names) == 0 { // embedded: its fields are the root's
				typ := f.Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if id, ok := typ.(*ast.Ident); ok && structs[id.Name] != nil {
					count(structs[id.Name])
					continue
				}
				fields = append(fields, "(embedded)")
				continue
			}
			for _, n := range f.Names {
				fields = append(fields, n.Name)
			}
		}
	}
	count(model)
	if len(fields) < 10 {
		t.Fatalf("Model has %d fields (%v): the count is wrong", len(fields), fields)
	}
	if len(fields) > maxRootFields {
		t.Errorf("Model has %d fields, over %d: %s. Put the new state in the component that shows it (see ARCHITECTURE.md, the console's components).",
			len(fields), maxRootFields, strings.Join(fields, ", "))
	}
}

func TestNoFileOverLong(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		limit := maxFileLines
		if l, ok := longFiles[name]; ok {
			limit = l
		}
		if n := bytes.Count(b, []byte("\n")); n > limit {
			t.Errorf("%s has %d lines, over %d: split it by what its parts do", name, n, limit)
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("checked %d files: the check reads the wrong directory", checked)
	}
}
