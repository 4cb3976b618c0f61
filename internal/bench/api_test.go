package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAPIPercentileNearestRank(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond // 1..100 ms
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 99, 0},
		{"one", ms(7), 50, 7 * time.Millisecond},
		{"one p100", ms(7), 100, 7 * time.Millisecond},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p90 of 1..100", hundred, 90, 90 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p99.9 of 1..100 is the max", hundred, 99.9, 100 * time.Millisecond},
		{"max", hundred, 100, 100 * time.Millisecond},
		{"tiny p is the min", hundred, 0.001, 1 * time.Millisecond},
		// Nearest rank: ceil(0.5*4) = 2nd value, no interpolation.
		{"p50 of four", ms(1, 2, 3, 40), 50, 2 * time.Millisecond},
		{"p75 of four", ms(1, 2, 3, 40), 75, 3 * time.Millisecond},
		{"p76 of four", ms(1, 2, 3, 40), 76, 40 * time.Millisecond},
	}
	for _, c := range cases {
		if got := apiPercentile(c.sorted, c.p); got != c.want {
			t.Errorf("%s: apiPercentile(p%v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
}

// fakeClock is a virtual clock for one load worker: sleeping jumps to the
// wake-up time, a request advances it by its service time.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleepUntil(_ context.Context, t time.Time) error {
	if t.After(c.t) {
		c.t = t
	}
	return nil
}

// runFake runs an open loop of one connection on a virtual clock, each
// request taking service(i); it returns the stats and when each request
// was sent.
func runFake(t *testing.T, rate float64, d time.Duration, grace time.Duration, service func(i int) time.Duration, fail func(i int) bool) (*apiLoadStats, []time.Duration) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	start := clk.t
	var sent []time.Duration
	l := &apiLoad{
		rate: rate, duration: d, conns: 1, grace: grace,
		now: clk.now, sleepUntil: clk.sleepUntil,
		do: func(_ context.Context, i int) error {
			if i != len(sent) {
				t.Fatalf("request %d sent after %d others", i, len(sent))
			}
			sent = append(sent, clk.t.Sub(start))
			clk.t = clk.t.Add(service(i))
			if fail != nil && fail(i) {
				return errors.New("boom")
			}
			return nil
		},
	}
	st, err := l.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st, sent
}

// A server faster than the arrival rate: requests go out on the schedule,
// not back to back, and each one's latency is its service time.
func TestAPILoadSendsOnSchedule(t *testing.T) {
	st, sent := runFake(t, 100, time.Second, 0, func(int) time.Duration { return 2 * time.Millisecond }, nil)
	if st.scheduled != 100 || len(sent) != 100 || st.errors != 0 || st.unsent != 0 {
		t.Fatalf("scheduled %d sent %d errors %d unsent %d, want 100 100 0 0", st.scheduled, len(sent), st.errors, st.unsent)
	}
	for i, at := range sent {
		if want := time.Duration(i) * 10 * time.Millisecond; at != want {
			t.Fatalf("request %d sent at %v, want %v (its due time)", i, at, want)
		}
	}
	for i, l := range st.lat {
		if l != 2*time.Millisecond {
			t.Fatalf("latency %d = %v, want 2ms", i, l)
		}
	}
	// 100 answers from 0 to 990ms + 2ms.
	if got, want := st.achievedRate(), 100/0.992; got != want {
		t.Errorf("achieved rate %v, want %v", got, want)
	}
}

// A server slower than the arrival rate: requests are sent as soon as the
// connection is free, and the time they waited for it counts. A closed loop
// would report 20ms for each; the open loop reports 20, 30, 40, ... ms.
func TestAPILoadChargesTheQueue(t *testing.T) {
	st, sent := runFake(t, 100, 100*time.Millisecond, 0, func(int) time.Duration { return 20 * time.Millisecond }, nil)
	if len(sent) != 10 || len(st.lat) != 10 {
		t.Fatalf("sent %d, answered %d, want 10 and 10", len(sent), len(st.lat))
	}
	for i := range sent {
		// Request i is due at 10ms·i; it goes out when request i-1 is
		// answered, at 20ms·i, and is answered at 20ms·(i+1).
		if want := time.Duration(i) * 20 * time.Millisecond; sent[i] != want {
			t.Errorf("request %d sent at %v, want %v", i, sent[i], want)
		}
		if want := time.Duration(10*i+20) * time.Millisecond; st.lat[i] != want {
			t.Errorf("request %d latency %v, want %v", i, st.lat[i], want)
		}
	}
	lat := st.sorted()
	if got := apiPercentile(lat, 100); got != 110*time.Millisecond {
		t.Errorf("max %v, want 110ms", got)
	}
	// 10 answers in 200ms.
	if got := st.achievedRate(); got != 50 {
		t.Errorf("achieved rate %v, want 50", got)
	}
}

// Requests still unsent when the grace after the schedule has passed are
// counted as unsent, not silently dropped; errors are counted apart from
// latencies.
func TestAPILoadUnsentAndErrors(t *testing.T) {
	st, sent := runFake(t, 100, 100*time.Millisecond, 50*time.Millisecond,
		func(int) time.Duration { return 40 * time.Millisecond }, func(i int) bool { return i == 1 })
	// Sent at 0, 40, 80, 120 ms; the next would go at 160ms, past the
	// cutoff of 150ms.
	if !slices.Equal(sent, []time.Duration{0, 40 * time.Millisecond, 80 * time.Millisecond, 120 * time.Millisecond}) {
		t.Fatalf("sent at %v", sent)
	}
	if st.scheduled != 10 || st.unsent != 6 || st.errors != 1 || len(st.lat) != 3 {
		t.Fatalf("scheduled %d unsent %d errors %d answered %d, want 10 6 1 3", st.scheduled, st.unsent, st.errors, len(st.lat))
	}
	if st.firstErr == nil || st.firstErr.Error() != "boom" {
		t.Errorf("first error %v", st.firstErr)
	}
}

// Several connections share one schedule: every request number is sent
// exactly once.
func TestAPILoadConnectionsShareTheSchedule(t *testing.T) {
	const n = 2000
	seen := make([]int32, n)
	l := &apiLoad{
		rate: n, duration: time.Second, conns: 8,
		// Everything is due at once on this clock: the test is about who
		// sends what, not when.
		now:        func() time.Time { return time.Time{}.Add(time.Hour) },
		sleepUntil: func(context.Context, time.Time) error { return nil },
		do: func(_ context.Context, i int) error {
			seen[i]++ // each i goes to one worker only, so no race
			return nil
		},
	}
	st, err := l.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.scheduled != n || len(st.lat) != n || st.unsent != 0 {
		t.Fatalf("scheduled %d answered %d unsent %d", st.scheduled, len(st.lat), st.unsent)
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("request %d sent %d times", i, c)
		}
	}
}

func TestAPIPickerShare(t *testing.T) {
	paths := []string{"/first", "/c1", "/c2"}
	if p := apiBenchPicker(paths, 0); p(3) != "/first" {
		t.Errorf("share 0 picked %s", p(3))
	}
	p := apiBenchPicker(paths, 0.25)
	cursor := 0
	for i := range 10000 {
		if p(i) != "/first" {
			cursor++
		}
		if first, again := p(i), p(i); first != again {
			t.Fatalf("slot %d picks differently twice", i)
		}
	}
	if cursor < 2000 || cursor > 3000 {
		t.Errorf("%d of 10000 slots picked a cursor page, want about 2500", cursor)
	}
}

func TestParseAPIProcStatus(t *testing.T) {
	status := "Name:\tsluice\nVmPeak:\t 2000000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t   70000 kB\nThreads:\t9\n"
	rss, hwm := parseProcStatus([]byte(status))
	if rss != 70000 || hwm != 81234 {
		t.Errorf("rss %d hwm %d, want 70000 81234", rss, hwm)
	}
}

func TestParseAPIWrk(t *testing.T) {
	out := `Running 30s test @ http://127.0.0.1:41234/api/v1/jobs?state=archived&limit=50
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    15.90ms    7.23ms 112.40ms   78.11%
    Req/Sec     1.01k   120.11     1.30k    70.50%
  Latency Distribution
     50%   14.80ms
     75%   19.10ms
     90%   24.60ms
     99%  990.00us
  60512 requests in 30.02s, 1.71GB read
  Non-2xx or 3xx responses: 3
Requests/sec:   2015.72
Transfer/sec:     58.32MB
`
	kv, err := parseAPIWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range kv {
		got = append(got, p[0]+"="+p[1])
	}
	want := "wrk_rps=2015.72 wrk_requests=60512 wrk_p50_ms=14.800 wrk_p75_ms=19.100 wrk_p90_ms=24.600 wrk_p99_ms=0.990 wrk_max_ms=112.400 wrk_errors=3"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("got  %s\nwant %s", s, want)
	}
}

func TestParseAPIProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (sluice (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 12345 123456 789 18446744073709551615\n"
	if got := parseAPIProcStat([]byte(stat)); got != 3250*time.Millisecond {
		t.Errorf("cpu %v, want 3.25s (325 ticks)", got)
	}
	if got := parseAPIProcStat([]byte("garbage")); got != 0 {
		t.Errorf("cpu of garbage %v, want 0", got)
	}
}

// The whole scenario on a small store: seeding, the server as a child
// process (the sluice binary, built here without -race), the work stream,
// the open loop and the result line. A second run reuses the seed.
func TestBenchAPI(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "go" // fails below, saying so
	}
	if out, err := exec.Command(goTool, "build", "-o", bin, "github.com/sluicehq/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "api.db")
	runIt := func(jobs string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"api", "--store", "sqlite://" + db, "--jobs", jobs,
			"--rate", "40", "--duration", "1s", "--warmup", "0s", "--connections", "4", "--cursor-share", "0.5",
			"--work-rate", "20", "--seed-concurrency", "20", "--seed-batch", "100", "--wrk=false",
			"--server-bin", bin}, &out, &errOut)
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
		}
		return strings.TrimSpace(out.String())
	}
	num := func(line, key string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?:^| )` + key + `=([0-9.]+)(?: |$)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("result line lacks a number for %s: %s", key, line)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}

	line := runIt("300")
	checkKeys(t, "api", line)
	for _, want := range []string{"system=sluice ", "scenario=api ", "store=sqlite ", "jobs=300 ", "seeded=300 ",
		"archived=300 ", "requests=40 ", "errors=0 ", "status=ok"} {
		if !strings.Contains(line, want) {
			t.Errorf("result line lacks %q: %s", want, line)
		}
	}
	if ok, unsent := num(line, "ok"), num(line, "unsent"); ok+unsent != 40 {
		t.Errorf("ok %v + unsent %v != 40 requests: %s", ok, unsent, line)
	}
	for _, key := range []string{"rate_achieved", "p50_ms", "p99_ms", "max_ms", "server_rss_mb_start",
		"server_rss_mb_peak", "server_rss_mb_end", "server_cpu_ms_per_req", "worker_jobs_done", "settle_seconds"} {
		num(line, key)
	}
	if num(line, "server_rss_mb_peak") <= 0 {
		t.Errorf("no server RSS read: %s", line)
	}

	// The seed is kept: a second run adds only what is missing.
	line = runIt("350")
	for _, want := range []string{"seeded=50 ", "archived=350 ", "status=ok"} {
		if !strings.Contains(line, want) {
			t.Errorf("second run lacks %q: %s", want, line)
		}
	}
}
