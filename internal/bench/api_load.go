package main

// The api scenario's load: open-loop requests at a fixed rate over HTTP
// (or wrk), and the statistics of their latencies.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// apiLoad sends requests at a fixed arrival rate: request i is due at
// start + i/rate, whatever happened to the ones before it. conns workers
// each take the next request number, wait until it is due (not at all
// when it is late) and send it, so at most conns are in flight. Its
// latency runs from when it was due, not from when a worker was free to
// send it: a server that falls behind is charged for the queue it causes
// (wrk2's correction of coordinated omission).
type apiLoad struct {
	rate     float64
	duration time.Duration
	conns    int
	// grace is how long past the end of the schedule late requests are
	// still sent (duration/2, at least 5s, when 0); the rest are unsent.
	grace time.Duration
	// do sends request i and reads its response.
	do func(ctx context.Context, i int) error
	// now and sleepUntil are the clock (the real one when nil).
	now        func() time.Time
	sleepUntil func(ctx context.Context, t time.Time) error
}

// apiLoadStats is an open-loop run's outcome.
type apiLoadStats struct {
	scheduled int // requests in the schedule: rate × duration
	errors    int
	unsent    int             // still not sent when the grace ended
	lat       []time.Duration // of the requests answered without error
	start     time.Time
	end       time.Time // when the last answer arrived
	firstErr  error
}

// due is when request i is due.
func (l *apiLoad) due(start time.Time, i int) time.Time {
	return start.Add(time.Duration(float64(i) * float64(time.Second) / l.rate))
}

func (l *apiLoad) run(ctx context.Context) (*apiLoadStats, error) {
	if l.rate <= 0 || l.duration <= 0 || l.conns <= 0 || l.do == nil {
		return nil, errors.New("open loop: rate, duration, conns and do required")
	}
	now, sleepUntil := l.now, l.sleepUntil
	if now == nil {
		now = time.Now
	}
	if sleepUntil == nil {
		sleepUntil = apiSleepUntil
	}
	grace := l.grace
	if grace <= 0 {
		grace = max(l.duration/2, 5*time.Second)
	}
	n := int(l.rate * l.duration.Seconds())
	st := &apiLoadStats{scheduled: n, start: now()}
	cutoff := st.start.Add(l.duration + grace)
	var next atomic.Int64
	type part struct {
		lat      []time.Duration
		errors   int
		sent     int
		end      time.Time
		firstErr error
	}
	parts := make([]part, l.conns)
	var wg sync.WaitGroup
	for w := range l.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &parts[w]
			p.lat = make([]time.Duration, 0, n/l.conns+1)
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				due := l.due(st.start, i)
				if err := sleepUntil(ctx, due); err != nil {
					return
				}
				if now().After(cutoff) {
					return
				}
				err := l.do(ctx, i)
				end := now()
				p.sent++
				if end.After(p.end) {
					p.end = end
				}
				if err != nil {
					p.errors++
					if p.firstErr == nil {
						p.firstErr = err
					}
					continue
				}
				p.lat = append(p.lat, end.Sub(due))
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sent := 0
	st.end = st.start
	for _, p := range parts {
		st.lat = append(st.lat, p.lat...)
		st.errors += p.errors
		sent += p.sent
		if p.end.After(st.end) {
			st.end = p.end
		}
		if st.firstErr == nil {
			st.firstErr = p.firstErr
		}
	}
	st.unsent = n - sent
	return st, nil
}

func apiSleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// sorted returns the latencies in ascending order.
func (s *apiLoadStats) sorted() []time.Duration {
	out := slices.Clone(s.lat)
	slices.Sort(out)
	return out
}

// achievedRate is answers without error per second, from the start of the
// schedule to the last answer.
func (s *apiLoadStats) achievedRate() float64 {
	d := s.end.Sub(s.start).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(len(s.lat)) / d
}

// apiPercentile is the nearest-rank p-th apiPercentile (0 < p ≤ 100) of sorted
// latencies: the smallest value with at least p% of the values at or
// below it. 0 for none.
func apiPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	k = min(max(k, 1), len(sorted))
	return sorted[k-1]
}

// apiHTTPLoad sends the generator's GETs over a fixed set of keep-alive
// connections.
type apiHTTPLoad struct {
	base string
	hc   *http.Client
	bufs sync.Pool
}

func newAPIHTTPLoad(base string, conns int) *apiHTTPLoad {
	tr := &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &apiHTTPLoad{
		base: base,
		hc:   &http.Client{Transport: tr, Timeout: 30 * time.Second},
		bufs: sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }},
	}
}

func (h *apiHTTPLoad) close() { h.hc.CloseIdleConnections() }

// get returns a request function for apiLoad: GET pick(i), which must
// answer 200 with a non-empty job list.
func (h *apiHTTPLoad) get(pick func(i int) string) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+pick(i), nil)
		if err != nil {
			return err
		}
		resp, err := h.hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		bp := h.bufs.Get().(*[]byte)
		defer h.bufs.Put(bp)
		buf := *bp
		k, err := io.ReadFull(resp.Body, buf[:len(apiJobsPrefix)])
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return err
		}
		var bad error
		if !bytes.Equal(buf[:k], apiJobsPrefix) {
			bad = fmt.Errorf("answer starts %q, not a job list", buf[:k])
		}
		if _, err := io.CopyBuffer(io.Discard, resp.Body, buf); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return bad
	}
}

// apiBenchWrk runs wrk and returns its figures as wrk_* keys.
func apiBenchWrk(ctx context.Context, bin, target string, conns int, d time.Duration) ([][2]string, error) {
	threads := min(runtime.NumCPU(), conns)
	cmd := exec.CommandContext(ctx, bin, "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns),
		"-d"+strconv.Itoa(int(math.Ceil(d.Seconds())))+"s", "--latency", target)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: %s", err, out.String())
	}
	return parseAPIWrk(out.String())
}

// parseAPIWrk reads wrk --latency's report.
func parseAPIWrk(s string) ([][2]string, error) {
	m := reAPIWrkRPS.FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("no Requests/sec in wrk's output: %q", s)
	}
	out := [][2]string{{"wrk_rps", m[1]}}
	if m := reAPIWrkReqs.FindStringSubmatch(s); m != nil {
		out = append(out, [2]string{"wrk_requests", m[1]})
	}
	toMS := func(v, unit string) string {
		f, _ := strconv.ParseFloat(v, 64)
		switch unit {
		case "us":
			f /= 1000
		case "s":
			f *= 1000
		}
		return strconv.FormatFloat(f, 'f', 3, 64)
	}
	for _, m := range reAPIWrkPct.FindAllStringSubmatch(s, -1) {
		out = append(out, [2]string{"wrk_p" + m[1] + "_ms", toMS(m[2], m[3])})
	}
	if m := reAPIWrkLatency.FindStringSubmatch(s); m != nil {
		out = append(out, [2]string{"wrk_max_ms", toMS(m[1], m[2])})
	}
	errs := 0
	if m := reAPIWrkNon2xx.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		errs += n
	}
	if m := reAPIWrkErrors.FindStringSubmatch(s); m != nil {
		for _, v := range m[1:] {
			n, _ := strconv.Atoi(v)
			errs += n
		}
	}
	out = append(out, [2]string{"wrk_errors", strconv.Itoa(errs)})
	return out, nil
}
