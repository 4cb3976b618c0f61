package tui

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestPackageDocNamesFilesThatExist: a document the package comment
// names (a NAME.md) is in the repository, next to the package or at its
// root. The comment sent readers to a STYLE.md the repository does not
// have.
func TestPackageDocNamesFilesThatExist(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "tui.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("tui.go has no package comment")
	}
	doc := f.Doc.Text()
	for _, name := range regexp.MustCompile(`[\w./-]+\.md\b`).FindAllString(doc, -1) {
		found := false
		for _, dir := range []string{".", ".."} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				found = true
			}
		}
		if !found {
			t.Errorf("the package comment names %s, which is neither in tui/ nor at the repository's root", name)
		}
	}
}
