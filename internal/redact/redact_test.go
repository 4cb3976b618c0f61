package redact

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://root:hunter2@db:5432/test", "postgres://root:xxxxx@db:5432/test"},
		{"postgres://root@db:5432/test?sslmode=disable&password=hunter2", "postgres://root@db:5432/test?sslmode=disable&password=xxxxx"},
		{"postgres://db/test?sslpassword=hunter2&schema=a", "postgres://db/test?sslpassword=xxxxx&schema=a"},
		{"redis://:hunter2@127.0.0.1:6379/0?ns=x", "redis://:xxxxx@127.0.0.1:6379/0?ns=x"},
		{"http://u:hunter2@h:1?access_token=hunter2", "http://u:xxxxx@h:1?access_token=xxxxx"},
		{"postgres://root:hun%zzter2@db/test", "postgres://root:xxxxx@db/test"},
		{"postgres://root@db/test?password=hunter2&x=%zz", "postgres://root@db/test?password=xxxxx&x=%zz"},
		{"host=db user=root password=hunter2 dbname=test", "host=db user=root password=xxxxx dbname=test"},
		{"host=db password='hun ter2'", "host=db password=xxxxx"},
		{"sqlite:///var/lib/sluice/jobs.db", "sqlite:///var/lib/sluice/jobs.db"},
		{"jobs.db", "jobs.db"},
		{"postgres://root@db:5432/test?sslmode=disable", "postgres://root@db:5432/test?sslmode=disable"},
		{"", ""},
		{"postgres://b:6432/t?listen_url=" + url.QueryEscape("postgres://root:hunter2@db:5432/t") + "&schema=a",
			"postgres://b:6432/t?listen_url=" + url.QueryEscape("postgres://root:xxxxx@db:5432/t") + "&schema=a"},
		{"postgres://b/t?listen_url=postgres://root:hunter2@db/t", "postgres://b/t?listen_url=" + url.QueryEscape("postgres://root:xxxxx@db/t")},
	} {
		got := URL(tc.in)
		if got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "hunter2") || strings.Contains(got, "hun ter2") {
			t.Errorf("URL(%q) = %q keeps the secret", tc.in, got)
		}
	}
}

func TestParseError(t *testing.T) {
	t.Parallel()
	raw := "postgres://root:hun%zzter2@db/test"
	_, err := url.Parse(raw) //lint:ignore SA1007 the invalid URL is the case under test
	if err == nil || !strings.Contains(err.Error(), "hun%zzter2") {
		t.Fatalf("url.Parse(%q) = %v: the test wants an error quoting the url", raw, err)
	}
	got := ParseError(err)
	if strings.Contains(got, "hun") || !strings.Contains(got, "invalid URL escape") {
		t.Fatalf("ParseError = %q", got)
	}
	if got := ParseError(errors.New("password=hunter2 refused")); strings.Contains(got, "hunter2") {
		t.Fatalf("ParseError(plain) = %q", got)
	}
}
