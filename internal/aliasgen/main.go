// Command aliasgen writes a Go file for package DSTPKG that names again every
// exported identifier of the package in SRCDIR (import path SRCIMPORT).
// usage: aliasgen SRCDIR SRCIMPORT DSTPKG [skip...]
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

func first(doc *ast.CommentGroup) string {
	if doc == nil {
		return ""
	}
	t := strings.Join(strings.Fields(doc.Text()), " ")
	if i := strings.Index(t, ". "); i >= 0 {
		t = t[:i+1]
	}
	if !strings.HasSuffix(t, ".") {
		t += "."
	}
	return t
}

type item struct {
	name, kind, text string
}

func main() {
	dir, imp, dst := os.Args[1], os.Args[2], os.Args[3]
	skip := map[string]bool{}
	outFile := ""
	rest := os.Args[4:]
	for i := 0; i < len(rest); i++ {
		if rest[i] == "-o" && i+1 < len(rest) {
			outFile = rest[i+1]
			i++
			continue
		}
		skip[rest[i]] = true
	}
	q := path.Base(imp)
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		panic(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			panic(err)
		}
		files = append(files, f)
	}
	var items []item
	imports := map[string]string{} // name -> path, from the source files
	for _, f := range files {
		for _, is := range f.Imports {
			ip := strings.Trim(is.Path.Value, `"`)
			name := path.Base(ip)
			if strings.HasPrefix(name, "v") && strings.Count(ip, "/") > 0 && len(name) <= 3 {
				name = path.Base(path.Dir(ip))
			}
			if is.Name != nil {
				name = is.Name.Name
			}
			imports[name] = ip
		}
	}
	src := func(n ast.Node) string {
		var b bytes.Buffer
		printer.Fprint(&b, fset, n)
		return b.String()
	}
	wrap := func(s string) string {
		var out []string
		line := "//"
		for _, w := range strings.Fields(s) {
			if len(line)+1+len(w) > 76 && line != "//" {
				out = append(out, line)
				line = "//"
			}
			line += " " + w
		}
		out = append(out, line)
		return strings.Join(out, "\n")
	}
	say := func(name, verb string, doc *ast.CommentGroup) string {
		if f := first(doc); f != "." {
			return fmt.Sprintf("%s (%s %s.%s)", strings.TrimSuffix(f, "."), verb, q, name) + "."
		}
		return fmt.Sprintf("%s %s %s.%s.", name, verb, q, name)
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil || !d.Name.IsExported() || skip[d.Name.Name] {
					continue
				}
				var args []string
				variadic := false
				for _, fld := range d.Type.Params.List {
					if _, ok := fld.Type.(*ast.Ellipsis); ok {
						variadic = true
					}
					for _, n := range fld.Names {
						args = append(args, n.Name)
					}
				}
				call := strings.Join(args, ", ")
				if variadic {
					call += "..."
				}
				tp := ""
				if d.Type.TypeParams != nil {
					var names []string
					for _, fld := range d.Type.TypeParams.List {
						for _, n := range fld.Names {
							names = append(names, n.Name)
						}
					}
					tp = "[" + strings.Join(names, ", ") + "]"
				}
				sig := strings.TrimPrefix(src(d.Type), "func")
				ret := "return "
				if d.Type.Results == nil {
					ret = ""
				}
				doc := wrap(say(d.Name.Name, "calls", d.Doc))
				items = append(items, item{d.Name.Name, "func", fmt.Sprintf("%s\nfunc %s%s {\n\t%s%s.%s%s(%s)\n}\n", doc, d.Name.Name, sig, ret, q, d.Name.Name, tp, call)})
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() || skip[s.Name.Name] {
							continue
						}
						doc := s.Doc
						if doc == nil {
							doc = d.Doc
						}
						tparams := ""
						targs := ""
						if s.TypeParams != nil {
							tparams = src(s.TypeParams)
							var names []string
							for _, fld := range s.TypeParams.List {
								for _, n := range fld.Names {
									names = append(names, n.Name)
								}
							}
							targs = "[" + strings.Join(names, ", ") + "]"
							tparams = "[" + strings.TrimSuffix(strings.TrimPrefix(tparams, "("), ")") + "]"
						}
						items = append(items, item{s.Name.Name, "type", fmt.Sprintf("%s\ntype %s%s = %s.%s%s\n", wrap(say(s.Name.Name, "an alias of", doc)), s.Name.Name, tparams, q, s.Name.Name, targs)})
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !n.IsExported() || skip[n.Name] {
								continue
							}
							kind := "const"
							if d.Tok == token.VAR {
								kind = "var"
							}
							items = append(items, item{n.Name, kind, fmt.Sprintf("\t%s = %s.%s\n", n.Name, q, n.Name)})
						}
					}
				}
			}
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].name < items[j].name })
	var body bytes.Buffer
	for _, it := range items {
		body.WriteString(it.text)
	}
	used := []string{imp}
	for name, ip := range imports {
		if strings.Contains(body.String(), name+".") {
			used = append(used, ip)
		}
	}
	sort.Strings(used)
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by internal/aliasgen from package %s. DO NOT EDIT.\n\npackage %s\n\nimport (\n", q, dst)
	// The standard library's imports first, then the others, as goimports
	// groups them.
	for _, std := range []bool{true, false} {
		for _, ip := range used {
			if !strings.Contains(strings.Split(ip, "/")[0], ".") == std {
				fmt.Fprintf(&b, "\t%q\n", ip)
			}
		}
		if std {
			b.WriteString("\n")
		}
	}
	b.WriteString(")\n\n")
	for _, k := range []string{"type", "func"} {
		for _, it := range items {
			if it.kind == k {
				b.WriteString(it.text + "\n")
			}
		}
	}
	for _, k := range []string{"const", "var"} {
		fmt.Fprintf(&b, "%s (\n", k)
		for _, it := range items {
			if it.kind == k {
				b.WriteString(it.text)
			}
		}
		b.WriteString(")\n\n")
	}
	out, err := format.Source(b.Bytes())
	if err != nil {
		os.Stdout.Write(b.Bytes())
		panic(err)
	}
	if outFile == "" {
		os.Stdout.Write(out)
		return
	}
	if err := os.WriteFile(outFile, out, 0o644); err != nil {
		panic(err)
	}
}
