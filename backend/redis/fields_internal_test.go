package redis

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScriptsNameFieldsByTable: no script's source names a hash field by
// a bare literal ('s', 'lid', ...) where it would mean the field: every
// such name goes through its table (F.state, ...), which the Go side
// reads the same hash by. The literals it allows are a key's own parts
// (K('dl', q) is a key, not the field dl) and the action spec's own
// argument names and a limit's scope, which share a spelling with fields.
func TestScriptsNameFieldsByTable(t *testing.T) {
	names := map[string]bool{}
	for _, fs := range [][]hashField{jobFields(), opFields(), fprFields(), idemFields(), workerFields(), leadFields(), scheduleFields()} {
		for _, f := range fs {
			names[f.name] = true
		}
	}
	allowed := map[string]bool{
		"local S = {from = set(split(A[x .. 'from'])), to = A[x .. 'to'], reason = A[x .. 'reason'] or ''}":           true,
		"for _, f in ipairs({'clear', 'schednow', 'fin', 'reopen', 'onemore', 'reset', 'del', 'rquar', 'rsuper'}) do": true,
		// A limit's scope ('kind', 'queue') shares a spelling with the
		// schedule's kind field.
		"elseif sc == 'kind' and (kinds == nil or kinds[nm] ~= nil) then": true,
		"if string.sub(f, 1, e - 1) == 'kind' then":                       true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lit := regexp.MustCompile(`'([a-z]+)'`)
	key := regexp.MustCompile(`K\('[a-z]+'`)
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(b), "`")
		for i := 1; i < len(parts); i += 2 { // the raw strings: the scripts
			for _, line := range strings.Split(parts[i], "\n") {
				code, _, _ := strings.Cut(line, "--")
				code = key.ReplaceAllString(code, "K(")
				if allowed[strings.TrimSpace(line)] {
					continue
				}
				for _, m := range lit.FindAllStringSubmatch(code, -1) {
					if names[m[1]] {
						found++
						t.Errorf("%s: the field %q by a literal: %s", f, m[1], strings.TrimSpace(line))
					}
				}
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("read %d files: not the package's directory?", len(files))
	}
}

// TestExpandRefs: a table reference becomes the field's name as a Lua
// string; a name that only ends like a table is left alone; a key the
// table lacks panics (at package init, for a script).
func TestExpandRefs(t *testing.T) {
	refs := fieldRefs()
	got := expandRefs("J[F.state] = x; OF.status, xF.state, A.F, J.F.state", refs)
	want := "J['s'] = x; 'st', xF.state, A.F, J.F.state"
	if got != want {
		t.Errorf("expanded to %q, want %q", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("F.no_such_field expanded without a panic")
		}
	}()
	expandRefs("J[F.no_such_field]", refs)
}

// TestLayoutsNameEveryOffset: every head value and record offset of the
// batch scripts has a name, once: a constant added without a name would
// leave the script reading it at no offset.
func TestLayoutsNameEveryOffset(t *testing.T) {
	for name, l := range map[string]batchLayout{"insert": insertLayout(), "complete": completeLayout(),
		"renew": renewLayout(), "checkpoint": checkpointLayout(), "delete expired": deleteExpiredLayout()} {
		seen := map[string]bool{}
		for _, n := range append(append([]string{}, l.head...), l.rec...) {
			if n == "" || seen[n] {
				t.Errorf("%s: name %q empty or twice in %v %v", name, n, l.head, l.rec)
			}
			seen[n] = true
		}
	}
}
