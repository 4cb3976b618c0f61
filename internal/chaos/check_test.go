package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// probationCase is a chaos.panic job that panics every run (classPanicN),
// quarantined by three panics under fences 1-3, then released under fence
// 3: the runs after the release (fence → process) and the fences whose
// runs crashed are what the engine made of its probation.
type probationCase struct {
	name    string
	runs    map[int64]string // fence → process, each run after the release
	crashed []int64          // fences after the release whose run crashed
	early   bool             // the runs after the release began before it
	want    []string         // a violation with each, or none
}

func TestCheckHoldsReleasedPoisonToProbation(t *testing.T) {
	t.Parallel()
	fate := map[string]string{"chaos-1": "lived", "chaos-2": "stalled"}
	for _, c := range []probationCase{
		{name: "quarantined again at its first crash", runs: map[int64]string{4: "chaos-1"}, crashed: []int64{4}},
		{name: "a zombie's run, then the crash", runs: map[int64]string{4: "chaos-2", 5: "chaos-1"}, crashed: []int64{5}},
		// What an engine that forgot the probation does: three more
		// crashes to quarantine, by the crash limit.
		{name: "probation ignored", runs: map[int64]string{4: "chaos-1", 5: "chaos-1", 6: "chaos-1"}, crashed: []int64{4, 5, 6},
			want: []string{"ended quarantined at crash_attempt 3", "crashed under fences [4 5 6]", "a run on probation that ended uncharged"}},
		{name: "an uncharged run in a process that lived", runs: map[int64]string{4: "chaos-1", 5: "chaos-1"}, crashed: []int64{5},
			want: []string{"a run on probation that ended uncharged"}},
		{name: "ran before its release", runs: map[int64]string{4: "chaos-1"}, crashed: []int64{4}, early: true,
			want: []string{"claimed while quarantined", "it ran while quarantined"}},
		{name: "released and never ran again", want: []string{"never ran again"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			released := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			j := &engine.Job{ID: "p", Kind: KindPanic, State: engine.StateQuarantined, TerminalReason: engine.ReasonQuarantined, Fence: 3}
			var execs []execRow
			var writes []writeRow
			for f := int64(1); f <= 3; f++ {
				j.Errors = append(j.Errors, engine.AttemptError{Attempt: int(f), Crash: true, Message: fmt.Sprintf("panic: chaos.panic: crash %d of 1000", f)})
				execs = append(execs, execRow{fence: f, crashes: int(f - 1), process: "chaos-1", at: released.Add(time.Duration(f-4) * time.Second)})
				writes = append(writes, writeRow{op: OpClaim, fence: f, process: "chaos-1", at: released.Add(time.Duration(f-4) * time.Second)})
			}
			at := released.Add(time.Second)
			if c.early {
				at = released.Add(-500 * time.Millisecond)
			}
			crashes := 0
			for f := int64(4); f <= 6; f++ {
				p, ok := c.runs[f]
				if !ok {
					continue
				}
				j.Fence = f
				execs = append(execs, execRow{fence: f, crashes: crashes, process: p, at: at})
				writes = append(writes, writeRow{op: OpClaim, fence: f, process: p, at: at})
				for _, cf := range c.crashed {
					if cf == f {
						crashes++
						j.Errors = append(j.Errors, engine.AttemptError{Attempt: int(f), Crash: true, Message: "panic: chaos.panic: again"})
					}
				}
			}
			j.CrashAttempt = crashes
			if len(c.runs) == 0 {
				j.CrashAttempt = 3
			}
			r := &run{o: Options{CrashLimit: 3}, rep: &Report{}, crashedInnocent: map[string]bool{}, exitedAt: map[string]time.Time{},
				log: func(string, ...any) {}}
			r.checkJob(j, classPanicN, execs, writes, fate, []release{{job: "p", fence: 3, at: released}})
			got := strings.Join(r.rep.Violations, "\n")
			if len(c.want) == 0 && got != "" {
				t.Fatalf("violations of a released job held to its probation:\n%s", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("want a violation with %q, got:\n%s", w, got)
				}
			}
		})
	}
}
