package sqlite_test

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
)

func benchJobs(n, offset int) []*backend.JobInsertParams {
	out := make([]*backend.JobInsertParams, n)
	for i := range out {
		id := fmt.Sprintf("%036d", offset+i)
		out[i] = &backend.JobInsertParams{
			ID: id, Queue: "default", Kind: "email", SchemaVersion: 1, MaxAttempts: 25,
			Payload:     json.RawMessage(`{"to":"someone@example.com","n":` + fmt.Sprint(offset+i) + `}`),
			Fingerprint: "fp" + id,
		}
	}
	return out
}

// BenchmarkInsert inserts batches of 1000 jobs.
func BenchmarkInsert(b *testing.B) {
	s := sqlitetest.New(b)
	b.ResetTimer()
	total := 0
	var cpu time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		batch := benchJobs(1000, i*1000)
		b.StartTimer()
		c0 := cpuTime()
		if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: batch, RefuseQuarantined: true}); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
		total += len(batch)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(total), "cpu-µs/job")
}

// BenchmarkClaimComplete inserts jobs once, then claims 100 and completes
// them in one batch, over and over: the bare claim/ack loop.
func BenchmarkClaimComplete(b *testing.B) {
	for _, batch := range []int{25, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchClaimComplete(b, batch) })
	}
}

// benchClaimComplete claims batch jobs, completes them, and repeats: the
// store's share of the work loop at a fixed batch size.
func benchClaimComplete(b *testing.B, batch int) {
	s := sqlitetest.New(b)
	n := max(b.N, 1) * batch
	for off := 0; off < n; off += 1000 {
		if _, err := s.JobInsertMany(ctx, &backend.JobInsertManyParams{Jobs: benchJobs(min(1000, n-off), off), RefuseQuarantined: true}); err != nil {
			b.Fatal(err)
		}
	}
	items := make([]backend.JobCompleteItem, 0, batch)
	done := 0
	b.ResetTimer()
	start := time.Now()
	cpu0 := cpuTime()
	for range b.N {
		res, err := s.JobClaim(ctx, &backend.JobClaimParams{
			Queue: "default", WorkerID: "w", LeaseID: "l", Limit: batch,
			Kinds: map[string]int{"email": 1}, LeaseDuration: time.Minute,
		})
		if err != nil {
			b.Fatal(err)
		}
		items = items[:0]
		for _, j := range res.Jobs {
			items = append(items, backend.JobCompleteItem{JobRef: backend.JobRef{ID: j.ID, LeaseID: j.Lease.ID, Fence: j.Fence}})
		}
		out, err := s.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items, EndProbation: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range out {
			if e != nil {
				b.Fatal(e)
			}
		}
		done += len(res.Jobs)
	}
	b.StopTimer()
	if done != b.N*batch {
		b.Fatalf("processed %d jobs, want %d", done, b.N*batch)
	}
	b.ReportMetric(float64(done)/time.Since(start).Seconds(), "jobs/s")
	reportCPU(b, cpu0, done)
}

// cpuTime is the process's CPU time so far (user and system): on a shared
// machine it varies less with the load than the elapsed time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process CPU time per job since start.
func reportCPU(b *testing.B, start time.Duration, jobs int) {
	if jobs > 0 {
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(jobs), "cpu-µs/job")
	}
}
