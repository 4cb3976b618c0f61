package backendtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// errorFamilies are real-world error messages, as HTTP clients, database
// drivers, cloud SDKs, gRPC, resolvers and TLS print them. The messages of
// one family differ only in ids, addresses, numbers and times and must
// share one error group; two families must never share one (the pairs
// that differ by a word, a quoted name or a code are there for that).
var errorFamilies = []struct {
	name string
	msgs []string
}{
	// HTTP clients.
	{"partner outage, request ids of any letters", []string{
		"partner api: 503 Service Unavailable (request id req_36652661)",
		"partner api: 503 Service Unavailable (request id req_aabdbebe)",
		"partner api: 503 Service Unavailable (request id req_deccaaac)",
		"partner api: 503 Service Unavailable (request id req_feedcfee)",
		"partner api: 503 Service Unavailable (request id req_9f86d081884c7d65)",
		"partner api: 503 Service Unavailable (request id req_2e549381)",
		"partner api: 503 Service Unavailable (request id req_5d381234)",
	}},
	{"partner gateway timeout", []string{
		"partner api: 504 Gateway Timeout (request id req_1b4f0e98)",
		"partner api: 504 Gateway Timeout (request id req_cafebabe)",
	}},
	{"go http client refused", []string{
		`Post "https://partner.example.com/v2/orders/8812": dial tcp 203.0.113.7:443: connect: connection refused`,
		`Post "https://partner.example.com/v2/orders/17": dial tcp [2001:db8::7]:443: connect: connection refused`,
	}},
	{"go http client timeout", []string{
		`Get "https://api.partner.io/v1/items?page=3": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
		`Get "https://api.partner.io/v1/items?page=41": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
	}},
	{"stripe decline, base62 request ids", []string{
		"card_declined: Your card was declined. (request: req_8gq3lHQjbzWqBk)",
		"card_declined: Your card was declined. (request: req_NffrFeUfNVaHib)",
		"card_declined: Your card was declined. (request: req_zxcvbnmqwrtp)",
	}},
	{"rate limited", []string{
		"unexpected status 429 Too Many Requests; retry after 17s",
		"unexpected status 429 Too Many Requests; retry after 1m30s",
	}},

	// Database drivers.
	{"pg unique orders_pkey", []string{
		`ERROR: duplicate key value violates unique constraint "orders_pkey" (SQLSTATE 23505)`,
		`ERROR: duplicate key value violates unique constraint "orders_pkey" (SQLSTATE 23505)`,
	}},
	{"pg unique users_email_key", []string{
		`ERROR: duplicate key value violates unique constraint "users_email_key" (SQLSTATE 23505)`,
	}},
	{"pg column decade", []string{`ERROR: column "decade" does not exist (SQLSTATE 42703)`}},
	{"pg column facade", []string{`ERROR: column "facade" does not exist (SQLSTATE 42703)`}},
	{"pgx connect refused", []string{
		"failed to connect to `host=10.0.3.4 user=app database=orders`: dial error (dial tcp 10.0.3.4:5432: connect: connection refused)",
		"failed to connect to `host=10.0.3.9 user=app database=orders`: dial error (dial tcp 10.0.3.9:5432: connect: connection refused)",
	}},
	{"mysql deadlock", []string{
		"Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction",
		"Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction",
	}},
	{"mongo duplicate ObjectId", []string{
		"E11000 duplicate key error collection: shop.orders index: _id_ dup key: { _id: ObjectId('65f1c2a9e4b0a1b2c3d4e5f6') }",
		"E11000 duplicate key error collection: shop.orders index: _id_ dup key: { _id: ObjectId('65f1c2aabbccddeeffaabbcc') }",
	}},
	{"redis moved", []string{"MOVED 3999 10.0.0.5:6381", "MOVED 12182 10.0.0.6:6380"}},
	{"sql no rows", []string{"sql: no rows in result set"}},
	{"sql tx done", []string{"sql: transaction has already been committed or rolled back"}},
	{"json unknown field amount", []string{`json: unknown field "amount"`}},
	{"json unknown field currency", []string{`json: unknown field "currency"`}},

	// Cloud SDKs.
	{"s3 access denied", []string{
		"operation error S3: PutObject, https response error StatusCode: 403, RequestID: 4442587FB7D0A2F9, HostID: Rc5U2DkVpe8gnS1sWeFf0Q7oRjJYbnmAE1fT9y2w1b0=, api error AccessDenied: Access Denied",
		"operation error S3: PutObject, https response error StatusCode: 403, RequestID: ABCDEFBFBCADEFAB, HostID: abcDEFghiJKL/mnoPQR+stuVWX9yz0klmNOP+qrs=, api error AccessDenied: Access Denied",
	}},
	{"s3 no such key", []string{
		"operation error S3: GetObject, https response error StatusCode: 404, RequestID: 0A1B2C3D4E5F6789, HostID: Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==, api error NoSuchKey: The specified key does not exist.",
	}},
	{"azure blob missing", []string{
		"The specified blob does not exist. RequestId:8a1c3f0e-401e-0045-5a2b-3c1d7e000000 Time:2024-05-01T12:00:00.1234567Z",
		"The specified blob does not exist. RequestId:2f9b7d10-b01e-0012-7a3c-9d8e7f000000 Time:2024-05-02T08:13:21.7654321Z",
	}},
	{"twilio invalid number", []string{
		"The 'To' number +15558675310 is not a valid phone number. (code 21211)",
		"The 'To' number +447700900123 is not a valid phone number. (code 21211)",
	}},
	{"twilio message sid", []string{
		"message SM1f0e5a4bcdef12345678901234567890 failed: undelivered",
		"message SMabcdefabcdef0123456789abcdefabcd failed: undelivered",
	}},

	// gRPC.
	{"grpc unavailable", []string{
		`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 10.1.2.3:9090: connect: connection refused"`,
		`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 10.1.2.44:9090: connect: connection refused"`,
	}},
	{"grpc deadline", []string{"rpc error: code = DeadlineExceeded desc = context deadline exceeded"}},
	{"grpc not found, ULIDs", []string{
		"rpc error: code = NotFound desc = order 01HZY3Q4M5N6P7R8S9T0VWXYZA not found",
		"rpc error: code = NotFound desc = order 01J0ABCDEFGHJKMNPQRSTVWXYZ not found",
	}},
	{"grpc tenant ids base36", []string{
		"rpc error: code = PermissionDenied desc = tenant acme-7f3k9q2x denied",
		"rpc error: code = PermissionDenied desc = tenant acme-k2m9x4pq denied",
	}},

	// DNS.
	{"dns orders-db", []string{
		"dial tcp: lookup orders-db.internal on 10.96.0.10:53: no such host",
		"dial tcp: lookup orders-db.internal on 10.96.0.11:53: no such host",
	}},
	{"dns payments-db", []string{"dial tcp: lookup payments-db.internal on 10.96.0.10:53: no such host"}},
	{"dns pod names", []string{
		"dial tcp: lookup api-7d9f8b6c4-x2x9k.svc.cluster.local: no such host",
		"dial tcp: lookup api-5c8d7f9b2-q7w2z.svc.cluster.local: no such host",
	}},

	// TLS.
	{"tls expired", []string{
		"tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2024-05-01T12:00:00Z is after 2024-04-30T23:59:59Z",
		"tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2024-06-11T01:02:03Z is after 2024-04-30T23:59:59Z",
	}},
	{"tls handshake failure", []string{"remote error: tls: handshake failure"}},
	{"tls bad certificate", []string{"remote error: tls: bad certificate"}},
	{"tls unknown authority", []string{
		`x509: certificate signed by unknown authority (possibly because of "crypto/rsa: verification error" while trying to verify candidate authority certificate "Partner CA 2")`,
	}},

	// The night's other kinds.
	{"sms opted out", []string{
		"sms: skipped: recipient +447700900123 opted out",
		"sms: skipped: recipient +15551234567 opted out",
	}},
	{"base32 idempotency keys", []string{
		"idempotency key MFRGGZDFMZTWQZLKNBSWY expired",
		"idempotency key KNBSWY3DPFQQGCZLRMFXGM expired",
	}},
	{"poison pill", []string{"signal: killed"}},
}

// testControlErrorGroupsRealWorld writes every message of errorFamilies as a
// dead job and checks that the store's error groups are exactly the
// families, each with its own count.
func testControlErrorGroupsRealWorld(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	var ps []engine.EnqueueParams
	var ids []string
	msgs := 0
	for fi, fam := range errorFamilies {
		for mi, m := range fam.msgs {
			id := fmt.Sprintf("rw-%02d-%d", fi, mi)
			ids = append(ids, id)
			ps = append(ps, engine.EnqueueParams{ID: id, Queue: "misc", Kind: "fail", MaxAttempts: 1,
				Args: failPayload{I: msgs, Msg: m}, Metadata: json.RawMessage(`{}`)})
			msgs++
		}
	}
	if msgs < 40 {
		t.Fatalf("the table has %d messages; it is meant to hold 40 or more", msgs)
	}
	t.Logf("%d messages in %d families", msgs, len(errorFamilies))
	res, err := f.e.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue: %v", r.Err)
		}
	}
	for _, id := range ids {
		waitState(t, f.s, id, engine.StateArchived)
	}
	groups, err := f.c.ErrorGroups(f.ctx, engine.Filter{Queues: []string{"misc"}})
	if err != nil {
		t.Fatal(err)
	}
	byPattern := map[string]engine.ErrorGroup{}
	for _, g := range groups {
		byPattern[g.Pattern] = g
	}
	seen := map[string]string{}
	for _, fam := range errorFamilies {
		p := engine.NormalizeError(fam.msgs[0])
		if other, ok := seen[p]; ok {
			t.Errorf("families %q and %q share the pattern %q", other, fam.name, p)
		}
		seen[p] = fam.name
		g, ok := byPattern[p]
		if !ok {
			t.Errorf("family %q: no group %q", fam.name, p)
			continue
		}
		if g.Count != int64(len(fam.msgs)) {
			t.Errorf("family %q: group %q holds %d jobs, want %d", fam.name, p, g.Count, len(fam.msgs))
		}
	}
	if len(groups) != len(errorFamilies) {
		var got []string
		for _, g := range groups {
			got = append(got, fmt.Sprintf("%d %s", g.Count, g.Pattern))
		}
		t.Fatalf("%d groups, want one a family (%d):\n%s", len(groups), len(errorFamilies), strings.Join(got, "\n"))
	}
}

// testControlErrorGroupsNearSingletons checks the count of near-identical
// singletons beside a group: ids the normaliser cannot tell from words
// (all-letter, short, no prefix) each make a group of one, and the group
// they most likely belong to says how many sit beside it.
func testControlErrorGroupsNearSingletons(t *testing.T, h Harness) {
	f := newCtl(t, h, nil)
	f.dead(t, "misc", "n", 3, "partner refused batch %d")
	for i, word := range []string{"kxqzmw", "pltrvq", "zzkwbn"} {
		f.dead(t, "misc", fmt.Sprintf("s%d", i), 1, "partner refused batch "+word)
	}
	f.dead(t, "misc", "o", 1, "partner accepted nothing at all")
	groups, err := f.c.ErrorGroups(f.ctx, engine.Filter{Queues: []string{"misc"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, g := range groups {
		got[g.Pattern] = g.NearSingletons
	}
	want := map[string]int{
		"partner refused batch <n>":       3,
		"partner refused batch kxqzmw":    2,
		"partner refused batch pltrvq":    2,
		"partner refused batch zzkwbn":    2,
		"partner accepted nothing at all": 0,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("near singletons:\n got %v\nwant %v", got, want)
	}
}
