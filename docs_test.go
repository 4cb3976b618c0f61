package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// issueRef is how a tracker's issue gets named in prose: the word issue
// and a number, with or without a #. The tracker is not in the repository, so a reader of the code
// or of a document cannot follow such a reference.
var issueRef = regexp.MustCompile(`(?i)\bissues? #?\d+`)

// TestNoIssueNumbers: no Go file and no document names an issue by number;
// a comment says what the code does and why, and a document says what a
// user gets. The peer harness's module is included, and vendored or
// generated trees are not in the repository.
func TestNoIssueNumbers(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := issueRef.FindString(line); m != "" {
				t.Errorf("%s:%d names %q: say what it is instead", path, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
