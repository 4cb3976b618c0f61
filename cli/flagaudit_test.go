package cli

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/backend/postgres"
	"github.com/sluicehq/sluice/backend/redis"
)

// userText is a piece of text a user may read, and where it comes from.
type userText struct{ where, text string }

// helpTexts are every command's help and every flag's usage.
func helpTexts(root *cobra.Command) []userText {
	var out []userText
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range []string{c.Short, c.Long, c.Example} {
			out = append(out, userText{c.CommandPath() + " help", s})
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			out = append(out, userText{c.CommandPath() + " --" + f.Name, f.Usage})
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// sourceStrings are the string literals of the product's Go files (tests
// left out) and its documents: the messages and help it prints.
func sourceStrings(t *testing.T) []userText {
	t.Helper()
	var out []userText
	fset := token.NewFileSet()
	for _, dir := range []string{"../cli", "../internal/storeurl", "../internal/cmdline", "../internal/demo", "../backend", "../engine", "../api", "../tui"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(filepath.Dir(path), "test") {
				return nil // tests and test helpers (redistest, pgtest) run other programs
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out = append(out, userText{fset.Position(lit.Pos()).String(), s})
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, doc := range []string{"../README.md", "../ARCHITECTURE.md", "../RELIABILITY.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, userText{"doc " + doc, string(b)})
	}
	return out
}

var (
	// A command line: sluice, its command words, then flags and arguments.
	cmdLineRE = regexp.MustCompile(`\bsluice((?:\s+[a-z][a-z-]*)+)((?:\s+(?:--?[a-z][a-z0-9-]*(?:[= ](?:'[^']*'|"[^"]*"|[^\s'"` + "`" + `-][^\s'"` + "`" + `]*))?|[A-Z][A-Z_|.]*|\[[^\]]*\]))*)`)
	flagRE    = regexp.MustCompile(`(?:^|[\s(\[` + "`" + `'"|,])--([a-z][a-z0-9-]*)`)
	urlRE     = regexp.MustCompile(`\b(postgres|postgresql|redis|rediss|redis\+cluster)://[^\s'"` + "`" + `)]*\?([^\s'"` + "`" + `)]+)`)
	boolParRE = regexp.MustCompile(`\b([a-z_]+)=true\b`)
)

// mentionAudit checks texts against the commands and flags of a root and
// the parameters the stores read.
type mentionAudit struct {
	root     *cobra.Command
	allFlags map[string]bool
	checked  int
}

func newMentionAudit(root *cobra.Command) *mentionAudit {
	a := &mentionAudit{root: root, allFlags: map[string]bool{"help": true, "version": true}}
	var collect func(c *cobra.Command)
	collect = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { a.allFlags[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { a.allFlags[f.Name] = true })
		for _, sub := range c.Commands() {
			collect(sub)
		}
	}
	collect(root)
	return a
}

var (
	pgParams    = append(postgres.URLParams(), "sslmode", "pool_max_conns", "pool_min_conns", "application_name", "connect_timeout", "search_path", "default_query_exec_mode")
	redisParams = append(redis.URLParams(), "max_retries", "dial_timeout", "read_timeout", "write_timeout", "protocol", "client_name", "pool_size", "db")
	boolParams  = []string{"migrate", "notify"}
)

// check returns what tx names that does not exist.
func (a *mentionAudit) check(tx userText) []string {
	var bad []string
	for _, m := range cmdLineRE.FindAllStringSubmatch(tx.text, -1) {
		words := strings.Fields(m[1])
		cmd := a.root
		for _, w := range words {
			sub, _, err := cmd.Find([]string{w})
			if err != nil || sub == cmd {
				break
			}
			cmd = sub
		}
		if cmd == a.root {
			// "schema sluice and ...", the product's name in a sentence;
			// but "sluice nope --flag" is a command line.
			if strings.HasPrefix(strings.TrimSpace(m[2]), "--") {
				bad = append(bad, fmt.Sprintf("%s: %q names no sluice command", tx.where, strings.TrimSpace(m[0])))
			}
			continue
		}
		a.checked++
		for _, f := range flagRE.FindAllStringSubmatch(m[2], -1) {
			if cmd.Flags().Lookup(f[1]) == nil && cmd.InheritedFlags().Lookup(f[1]) == nil && f[1] != "help" {
				bad = append(bad, fmt.Sprintf("%s: %q: %s has no flag --%s", tx.where, strings.TrimSpace(m[0]), cmd.CommandPath(), f[1]))
			}
		}
	}
	// The documents also show other programs' flags (go run
	// ./internal/chaos --seed): there only sluice command lines count.
	if !strings.HasPrefix(tx.where, "doc ") {
		for _, f := range flagRE.FindAllStringSubmatch(tx.text, -1) {
			a.checked++
			if !a.allFlags[f[1]] {
				bad = append(bad, fmt.Sprintf("%s: names --%s, which no sluice command has", tx.where, f[1]))
			}
		}
	}
	for _, u := range urlRE.FindAllStringSubmatch(tx.text, -1) {
		known := pgParams
		if strings.HasPrefix(u[1], "redis") {
			known = redisParams
		}
		for _, kv := range strings.Split(u[2], "&") {
			name, _, _ := strings.Cut(kv, "=")
			a.checked++
			if name != "" && !slices.Contains(known, name) && !strings.ContainsAny(name, ".{}<>…") {
				bad = append(bad, fmt.Sprintf("%s: %s URL parameter %q is not one the store reads", tx.where, u[1], name))
			}
		}
	}
	for _, b := range boolParRE.FindAllStringSubmatch(tx.text, -1) {
		a.checked++
		if !slices.Contains(boolParams, b[1]) {
			bad = append(bad, fmt.Sprintf("%s: names %s=true, which no store URL reads", tx.where, b[1]))
		}
	}
	return bad
}

// TestMessagesNameRealFlagsAndCommands walks every help text, message and
// document that names a sluice command, a --flag or a store URL parameter
// and checks each against the commands and flags cobra holds and the
// parameters the stores read: a message must not send an operator to a
// flag that does not exist.
func TestMessagesNameRealFlagsAndCommands(t *testing.T) {
	root := newRoot()
	a := newMentionAudit(root)
	for _, tx := range append(helpTexts(root), sourceStrings(t)...) {
		for _, b := range a.check(tx) {
			t.Error(b)
		}
	}
	if a.checked < 300 {
		t.Fatalf("only %d mentions checked: the walk found too little", a.checked)
	}
	t.Logf("%d mentions of commands, flags and URL parameters checked", a.checked)
}

// TestMentionAuditCatches shows the audit failing on each kind of wrong
// mention, so that its passing above means something.
func TestMentionAuditCatches(t *testing.T) {
	a := newMentionAudit(newRoot())
	for _, text := range []string{
		"start this process with --migrat",
		"run: sluice serve --store URL --migrat",
		"run: sluice servee --store URL",
		"`sluice migrate --store URL --yes`",
		"postgres://app@db/jobs?schema=sluice&migrat=true",
		"redis://127.0.0.1:6379/0?ns=sluice&migrate=true",
		"open it with migrat=true",
	} {
		if bad := a.check(userText{"test", text}); len(bad) == 0 {
			t.Errorf("%q passes the audit", text)
		}
	}
	for _, text := range []string{
		"start serve or worker with --migrate",
		"sluice migrate --store URL, or migrate=true in the URL",
		"sluice bulk retry -q 'state:archived' --rate 10 --cutoff T --wait",
		"schema sluice and namespace sluice",
	} {
		if bad := a.check(userText{"test", text}); len(bad) != 0 {
			t.Errorf("%q fails the audit: %v", text, bad)
		}
	}
}

// TestReadmeListsEveryStoreParameter: the README's table of the stores'
// own URL parameters has a row for each one a store takes off the URL,
// so a parameter added to a store is documented where users look.
func TestReadmeListsEveryStoreParameter(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for store, params := range map[string][]string{
		"PostgreSQL": postgres.URLParams(),
		"Redis":      redis.URLParams(),
	} {
		for _, p := range params {
			if row := "| " + store + " | `" + p + "="; !strings.Contains(readme, row) {
				t.Errorf("README.md's store parameters have no row %q...", row)
			}
		}
	}
}
