package api

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"unicode"

	"github.com/sluicehq/sluice/engine"
)

// Identity is who a bearer token names: the actor recorded on the jobs
// and operations it touches, and what it may do.
type Identity struct {
	Name string
	Role engine.Role
}

// roleRank orders the roles: each may do what the ones below it may.
func roleRank(r engine.Role) int {
	switch r {
	case engine.RoleViewer:
		return 1
	case engine.RoleInspector:
		return 2
	case engine.RoleOperator:
		return 3
	case engine.RoleAdmin:
		return 4
	}
	return 0
}

// RoleAtLeast reports whether have may do what need may.
func RoleAtLeast(have, need engine.Role) bool {
	return roleRank(have) >= roleRank(need) && roleRank(need) > 0
}

// ValidRole reports whether r names a role.
func ValidRole(r engine.Role) bool { return roleRank(r) > 0 }

// MinTokenLength is the shortest token ParseTokens accepts.
const MinTokenLength = 16

// ParseTokens reads a tokens file: one `name:role:token` per line (role
// viewer, inspector, operator or admin; the token is the rest of the line
// and may contain colons), blank lines and lines starting with # ignored.
// Token values never appear in its errors.
func ParseTokens(r io.Reader) (map[string]Identity, error) {
	out := map[string]Identity{}
	names := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("%w: tokens line %d: want name:role:token", engine.ErrInvalid, n)
		}
		name, role, token := strings.TrimSpace(parts[0]), engine.Role(strings.TrimSpace(parts[1])), strings.TrimSpace(parts[2])
		if name == "" || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
			return nil, fmt.Errorf("%w: tokens line %d: name must be non-empty printable text without spaces", engine.ErrInvalid, n)
		}
		if !ValidRole(role) {
			return nil, fmt.Errorf("%w: tokens line %d (%s): unknown role %q (viewer, inspector, operator, admin)", engine.ErrInvalid, n, name, role)
		}
		if len(token) < MinTokenLength {
			return nil, fmt.Errorf("%w: tokens line %d (%s): token shorter than %d characters", engine.ErrInvalid, n, name, MinTokenLength)
		}
		if names[name] {
			return nil, fmt.Errorf("%w: tokens line %d: name %q given twice", engine.ErrInvalid, n, name)
		}
		if _, dup := out[token]; dup {
			return nil, fmt.Errorf("%w: tokens line %d (%s): token already given to another name", engine.ErrInvalid, n, name)
		}
		names[name] = true
		out[token] = Identity{Name: name, Role: role}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	return out, nil
}

// tokenTable checks bearer tokens in constant time: each configured token
// is kept as its SHA-256, and a presented token's digest is compared with
// every one of them, so neither the match nor its position shows in the
// time taken.
type tokenTable struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum [sha256.Size]byte
	id  Identity
}

func newTokenTable(tokens map[string]Identity) *tokenTable {
	t := &tokenTable{}
	for tok, id := range tokens {
		t.entries = append(t.entries, tokenEntry{sum: sha256.Sum256([]byte(tok)), id: id})
	}
	return t
}

func (t *tokenTable) empty() bool { return len(t.entries) == 0 }

// lookup returns the identity of token, if any.
func (t *tokenTable) lookup(token string) (Identity, bool) {
	sum := sha256.Sum256([]byte(token))
	var found Identity
	match := 0
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			found = t.entries[i].id
			match = 1
		}
	}
	return found, match == 1
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// ActorHeader names the person acting through a shared client (the
// console's user); the server records it after the token's name.
const ActorHeader = "Sluice-Actor"

// localActor is the actor of requests to a server without tokens.
const localActor = "local"

// actorOf is the name recorded for a request: the token's name (or
// "local" without tokens), followed by the ActorHeader's name when one is
// given. Without tokens the header's name stands alone.
func actorOf(r *http.Request, id Identity, tokens bool) string {
	who := cleanActor(r.Header.Get(ActorHeader))
	switch {
	case who == "":
		return id.Name
	case !tokens:
		return who
	case who == id.Name:
		return who
	}
	return id.Name + "/" + who
}

// cleanActor keeps a header's actor name printable and short.
func cleanActor(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 64 || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == '/' }) {
		return ""
	}
	return s
}

// loopbackHost reports whether a request's Host names this machine: a
// loopback address, localhost or a name under .localhost, with or
// without a port. A server without tokens answers only such requests: a
// page on another site can point its own name at 127.0.0.1 (DNS
// rebinding) and send requests the browser lets it read, but their Host
// is that site's name.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errHostNotLoopback refuses a request to a server without tokens whose
// Host is not this machine.
func errHostNotLoopback(host string) error {
	return newHTTPError(http.StatusForbidden, reasonForbidden,
		"host %q refused: a server without tokens answers only requests to a loopback name or address (127.0.0.1, [::1], localhost); give it tokens to serve other names", cleanHost(host))
}

// cleanHost keeps a Host header printable and short for an error.
func cleanHost(s string) string {
	if len(s) > 255 || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return "(unprintable)"
	}
	return s
}
