// Package redact hides secrets in text that is printed, logged or sent
// back in an error: a store or API URL's password, whether it is the
// URL's user password or a query parameter, in a URL that parses or
// one that does not. Every message, log line, header and listing that
// names a URL passes it through URL; nothing else in the module
// decides what a secret in a URL looks like.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Mask stands in for a hidden secret.
const Mask = "xxxxx"

// secretKey reports whether a query parameter (or key=value setting)
// named key holds a secret: password, sslpassword, pass, pwd, and any
// key naming a secret or token.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	switch k {
	case "pass", "pwd", "passwd":
		return true
	}
	return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.Contains(k, "token")
}

// URL returns raw with every secret it holds replaced by Mask: the
// password of its user information and the value of each secret query
// parameter. A URL that does not parse is masked by pattern (user
// information after "://", key=value pairs naming a secret) rather than
// echoed; text that holds no secret comes back unchanged.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Scheme == "" {
		return byPattern(raw)
	}
	out := *u
	if u.User != nil {
		if _, has := u.User.Password(); has {
			out.User = url.UserPassword(u.User.Username(), Mask)
		}
	}
	out.RawQuery = maskQuery(u.RawQuery)
	if out.RawQuery == u.RawQuery && out.User == u.User {
		return raw
	}
	return out.String()
}

// maskQuery masks the values of secret parameters in a raw query,
// keeping the order and encoding of the others.
func maskQuery(raw string) string {
	if raw == "" {
		return raw
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, _, has := strings.Cut(p, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if !has {
			continue
		}
		eq := strings.IndexByte(p, '=') + 1
		if secretKey(k) {
			parts[i] = p[:eq] + Mask
			continue
		}
		// A parameter may be a URL of its own (PostgreSQL's listen_url)
		// with its own password.
		if v, err := url.QueryUnescape(p[eq:]); err == nil && strings.Contains(v, "://") {
			if r := URL(v); r != v {
				parts[i] = p[:eq] + url.QueryEscape(r)
			}
		} else if err != nil {
			parts[i] = p[:eq] + byPattern(p[eq:])
		}
	}
	return strings.Join(parts, "&")
}

var (
	// userinfo is "scheme://user:password@" up to the last @ before the
	// path: a password may hold an unescaped @ or /.
	userinfo = regexp.MustCompile(`(://[^:/@\s]*:)[^\s]*@`)
	// keyValue is key=value in a query or a key=value connection string.
	keyValue = regexp.MustCompile(`([A-Za-z_]+)=('[^']*'|[^&;\s]*)`)
)

// byPattern masks what looks like a secret in text that is not a
// well-formed URL; when in doubt it masks more, never less.
func byPattern(s string) string {
	s = userinfo.ReplaceAllString(s, "${1}"+Mask+"@")
	return keyValue.ReplaceAllStringFunc(s, func(kv string) string {
		k, _, _ := strings.Cut(kv, "=")
		if secretKey(k) {
			return k + "=" + Mask
		}
		return kv
	})
}

// ParseError is what url.Parse's error says with the URL it quotes
// masked: url.Error repeats the whole URL, password and all.
func ParseError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + " " + URL(ue.URL) + ": " + ue.Err.Error()
	}
	return byPattern(err.Error())
}
