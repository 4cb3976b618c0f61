package sluicetype

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalizeError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		// The product story.
		{"story addr", "dial tcp 10.0.0.12:5432: connection refused", "dial tcp <addr>: connection refused"},
		{"story quoted", `invalid currency "EURO"`, `invalid currency "<str>"`},
		{"story unchanged", "template not found", "template not found"},

		{"empty", "", ""},
		{"ipv4 no port", "no route to host 192.168.1.1", "no route to host <addr>"},
		{"ipv4 end of sentence", "cannot reach 10.1.2.3.", "cannot reach <addr>."},
		{"ipv4 in parens", "peer (172.16.0.1:443) reset", "peer (<addr>) reset"},
		{"not an ipv4", "version 999.1.2.3 bad", "version <n> bad"},
		{"ipv6 bracket port", "dial tcp [2001:db8::1]:5432: i/o timeout", "dial tcp <addr>: i/o timeout"},
		{"ipv6 bracket", "listen on [::1] failed", "listen on <addr> failed"},
		{"ipv6 bare loopback", "dial tcp ::1: refused", "dial tcp <addr>: refused"},
		{"ipv6 bare full", "host 2001:0db8:85a3:0000:0000:8a2e:0370:7334 down", "host <addr> down"},
		{"ipv6 zone", "route fe80::1%eth0 missing", "route <addr> missing"},
		{"ipv6 mapped v4", "from ::ffff:10.0.0.1 denied", "from <addr> denied"},
		{"cpp scope not an address", "std::vector overflow", "std::vector overflow"},
		{"clock not an address", "at 12:30:45 it broke", "at <n>:<n>:<n> it broke"},
		{"uuid", "job 3f2b8c1e-9a4d-4e5f-8a6b-1c2d3e4f5a6b not found", "job <uuid> not found"},
		{"uuid upper", "ID 3F2B8C1E-9A4D-4E5F-8A6B-1C2D3E4F5A6B gone", "ID <uuid> gone"},
		{"hex id", "object a3f9c2e1d0b4 missing", "object <id> missing"},
		{"hex sha", "commit 5d41402abc4b2a76b9719d911017c592 bad", "commit <id> bad"},
		{"hex glued by underscore", "key job_3fa9c2e1d0 locked", "key job_<id> locked"},
		{"hex literal", "bad opcode 0x1F at 0xdeadbeef", "bad opcode <hex> at <hex>"},
		{"hex word without digits is an id", "deadbeef and facade", "<id> and facade"},
		{"short hex kept as number+letters", "code 3fa9", "code <n>fa9"},
		{"decimal 8+ digits", "order 12345678 unknown", "order <id> unknown"},
		{"int", "retry 3 of 25", "retry <n> of <n>"},
		{"negative", "offset -5 invalid", "offset -<n> invalid"},
		{"float", "ratio 0.75 too high", "ratio <n> too high"},
		{"exponent", "value 1.5e10 overflows", "value <n> overflows"},
		{"duration s", "timeout after 30s", "timeout after <n>"},
		{"duration ms", "took 1.5ms", "took <n>"},
		{"duration µs", "took 250µs", "took <n>"},
		{"duration compound", "deadline 1h30m0.5s exceeded", "deadline <n> exceeded"},
		{"size", "body 10MB over 1MiB", "body <n> over <n>"},
		{"number then word", "5min later, 2nd try", "<n>min later, <n>nd try"},
		{"percent", "disk 97% full", "disk <n>% full"},
		{"status", "HTTP 503 Service Unavailable", "HTTP <n> Service Unavailable"},
		{"names keep digits", "crypto/x509: sha256 mismatch in v1.2.3 int64", "crypto/x509: sha256 mismatch in v1.2.3 int64"},
		{"id suffix", "user-42 and user_43", "user-<n> and user_<n>"},
		{"email", "cannot mail ada.lovelace+x@example.co.uk today", "cannot mail <email> today"},
		{"url", "Get https://api.example.com/v1/users/42?x=1: EOF", "Get <url>: EOF"},
		{"url quoted", `Post "https://api.stripe.com/v1/charges": context deadline exceeded`, `Post "<url>": context deadline exceeded`},
		{"url with credentials", "connect postgres://u:p@db:5432/app failed", "connect <url> failed"},
		{"url in parens", "see (https://x.io/a).", "see (<url>)."},
		{"quoted with escapes", `bad value "say \"hi\"" here`, `bad value "<str>" here`},
		{"quoted with number", `value "amount" is 42`, `value "<str>" is <n>`},
		{"quoted field name kept", `field "amount" is 42`, `field "amount" is <n>`},
		{"quoted address", `host "10.0.0.1" refused`, `host "<addr>" refused`},
		{"two quoted", `"a" != "b"`, `"<str>" != "<str>"`},
		{"unterminated quote", `bad "value 12`, `bad "value <n>`},
		{"timestamp", "lease expired at 2024-05-01T12:00:00.123Z", "lease expired at <time>"},
		{"timestamp offset", "at 2024-05-01T12:00:00+02:00 ok", "at <time> ok"},
		{"date", "report for 2024-05-01 missing", "report for <time> missing"},
		{"go time", "at 2024-05-01 12:00:00.5 +0000 UTC", "at <time> +<n> UTC"},
		{"first line", "panic: boom\ngoroutine 1 [running]:\nmain.main()", "panic: boom"},
		{"first non-blank line", "\n\n  \r\n  oops 1  \n2", "oops <n>"},
		{"crlf", "bad thing\r\nmore", "bad thing"},
		{"collapse space", "  too   many\t\tspaces  ", "too many spaces"},
		{"mixed", `dial tcp 10.0.0.12:5432 for job 3f2b8c1e-9a4d-4e5f-8a6b-1c2d3e4f5a6b (attempt 3): "x"`, `dial tcp <addr> for job <uuid> (attempt <n>): "<str>"`},
		{"invalid utf-8", "bad \xff byte 7", "bad \uFFFD byte <n>"},
		{"masks stay", "<n> <addr> <hex> <id>", "<n> <addr> <hex> <id>"},
		{"zone swallowing the next run", "00::0%0::", "<addr>::"},
		{"bare double colon", "a :: b", "a :: b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := NormalizeError(tt.in)
			if got != tt.want {
				t.Fatalf("NormalizeError(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := NormalizeError(got); again != got {
				t.Fatalf("not idempotent: %q then %q", got, again)
			}
		})
	}
}

func TestNormalizeErrorGroups(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{
			"dial tcp 10.0.0.12:5432: connection refused",
			"dial tcp 10.0.0.13:6543: connection refused",
			"dial tcp [fd00::7]:5432: connection refused",
		},
		{
			`invalid currency "EURO"`,
			`invalid currency "DOLLARS"`,
		},
		{
			"job 3f2b8c1e-9a4d-4e5f-8a6b-1c2d3e4f5a6b timed out after 30s",
			"job 00000000-0000-0000-0000-000000000000 timed out after 1m30s",
		},
	}
	for _, g := range groups {
		want := NormalizeError(g[0])
		for _, m := range g[1:] {
			if got := NormalizeError(m); got != want {
				t.Errorf("%q → %q, but %q → %q", g[0], want, m, got)
			}
		}
	}
}

func TestNormalizeErrorCap(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 500)
	got := NormalizeError(long)
	if n := utf8.RuneCountInString(got); n != MaxNormalizedError {
		t.Fatalf("got %d runes, want %d", n, MaxNormalizedError)
	}
	if !utf8.ValidString(got) {
		t.Fatal("cut in the middle of a rune")
	}
	// Cut at a space: whole words only.
	words := strings.Repeat("word ", 100)
	if got := NormalizeError(words); got != strings.TrimSpace(strings.Repeat("word ", 40)) {
		t.Fatalf("got %q", got)
	}
	words = strings.Repeat("abcdefg ", 30)
	if got := NormalizeError(words); got != strings.TrimSpace(strings.Repeat("abcdefg ", 25)) {
		t.Fatalf("got %q", got)
	}
	// The masks shorten the message first.
	nums := strings.Repeat("123456 ", 60)
	if got := NormalizeError(nums); got != strings.TrimSpace(strings.Repeat("<n> ", 50)) {
		t.Fatalf("got %q", got)
	}
}

func FuzzNormalizeError(f *testing.F) {
	for _, s := range []string{
		"dial tcp 10.0.0.12:5432: connection refused",
		`invalid currency "EURO"`,
		"fe80::1%eth0 [::1]:80 1h30m 0x1f 2024-05-01T00:00:00Z a@b.co http://x/y",
		"\xff\n\"\\",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := NormalizeError(s)
		if utf8.RuneCountInString(got) > MaxNormalizedError {
			t.Fatalf("too long: %d runes", utf8.RuneCountInString(got))
		}
		if !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r") {
			t.Fatalf("bad output %q", got)
		}
		// Idempotence is checked on the table above, not here: on made-up
		// runs such as "A000:::0" a mask can end a run of hex digits and
		// colons sooner the second time round.
	})
}
