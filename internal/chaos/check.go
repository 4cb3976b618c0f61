package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

type execRow struct {
	fence            int64
	attempt, crashes int
	process          string
}

type writeRow struct {
	op       string
	fence    int64
	process  string
	accepted bool
}

var reapedRx = regexp.MustCompile(`worker (\S+) stopped heartbeating`)

// check is the checker. After the drain, with every worker stopped:
//
//   - every enqueued job is in exactly one terminal state, with a reason
//     (completed's reason is the state itself; the others carry theirs);
//   - none is running or holds a lease;
//   - an innocent job completed; a poison job is quarantined, at the crash
//     limit exactly; no innocent is quarantined;
//   - fences grew by one per claim: no two claims of a job share a fence,
//     none is beyond the job's fence, no fence ran twice or in a process
//     other than the one that claimed it;
//   - no success under two live fences: at most one outcome write was
//     accepted per fence, and an accepted completion is the job's last
//     claim's;
//   - attempt and crash_attempt match the errors on the record, and every
//     crash is explained: a panic of a panicking kind, or a process the
//     harness killed or froze, or one that died by itself (a pill);
//   - the maintained counters agree with the jobs.
//
// Records lost to a kill between a store write and its side-table row are
// counted (Unrecorded), never read as writes that did not happen.
func (r *run) check(ctx context.Context) error {
	execs, writes, err := r.readSide()
	if err != nil {
		return err
	}
	fate := map[string]string{} // process → how it ended (or "" while it lived through)
	r.mu.Lock()
	r.exitedAt = map[string]time.Time{}
	for _, p := range r.procs {
		r.exitedAt[p.name] = p.exitedAt
		switch {
		case p.killed:
			fate[p.name] = "killed"
		case p.failed:
			fate[p.name] = "failed"
			r.rep.StartFailures++
		case p.unasked:
			fate[p.name] = "died"
			r.rep.PillDeaths++
		case p.stopped > 0:
			fate[p.name] = "stalled"
		case p.termed:
			fate[p.name] = "termed"
		default:
			fate[p.name] = "lived"
		}
	}
	r.mu.Unlock()

	r.rep.Jobs = len(r.ids)
	tally := map[engine.State]int64{}
	for _, id := range r.ids {
		var j *engine.Job
		err := r.retry(ctx, "get job", func() error {
			var err error
			j, err = r.store.JobGetByID(ctx, &engine.JobGetByIDParams{ID: id})
			return err
		})
		if err != nil {
			r.violate("job %s: %v", id, err)
			continue
		}
		tally[j.State]++
		r.checkJob(j, r.class[id], execs[id], writes[id], fate)
	}

	innocents, hit := 0, 0
	for _, id := range r.ids {
		if innocent(r.class[id]) {
			innocents++
			if r.crashedInnocent[id] {
				hit++
			}
		}
	}
	if innocents > 0 {
		r.rep.CrashRate = float64(hit) / float64(innocents)
	}

	var c *engine.Counts
	err = r.retry(ctx, "counts", func() error {
		var err error
		c, err = r.e.Counts(ctx, r.queue)
		return err
	})
	if err != nil {
		return fmt.Errorf("counts: %w", err)
	}
	for _, st := range engine.AllStates {
		if got, want := c.Total[st], tally[st]; got != want {
			r.violate("counters: %d jobs %s, the jobs say %d", got, st, want)
		}
	}
	return nil
}

func (r *run) checkJob(j *engine.Job, class string, execs []execRow, writes []writeRow, fate map[string]string) {
	rep := r.rep
	name := fmt.Sprintf("job %s (%s)", j.ID, class)
	if !j.State.Terminal() {
		r.violate("%s: %s after the drain, not terminal", name, j.State)
	}
	if j.Lease != nil || j.State == engine.StateRunning {
		r.violate("%s: %s with a lease %+v after the drain", name, j.State, j.Lease)
	}
	switch j.State {
	case engine.StateCompleted:
		rep.Completed++
		if j.TerminalReason != "" {
			r.violate("%s: completed with terminal reason %q", name, j.TerminalReason)
		}
	case engine.StateQuarantined:
		rep.Quarantined++
		if j.TerminalReason != engine.ReasonQuarantined {
			r.violate("%s: quarantined with terminal reason %q", name, j.TerminalReason)
		}
	default:
		if j.State.Terminal() && j.TerminalReason == "" {
			r.violate("%s: %s without a reason", name, j.State)
		}
	}

	// Errors on the record, and where each crash came from.
	crashErrs, otherErrs := 0, 0
	var order []string // where each crash came from, oldest first
	for _, e := range j.Errors {
		if !e.Crash {
			otherErrs++
			continue
		}
		crashErrs++
		switch m := reapedRx.FindStringSubmatch(e.Message); {
		case strings.HasPrefix(e.Message, "panic:"):
			if j.Kind != KindPanic {
				r.violate("%s: a panic of kind %s, which never panics: %s", name, j.Kind, e.Message)
			}
			order = append(order, "panic")
		case m != nil:
			proc := processName(m[1])
			f, ok := fate[proc]
			switch {
			case !ok:
				r.violate("%s: crash charged to %s, no process of this run", name, m[1])
			case (f == "lived" || f == "termed") && !r.exitedBefore(proc, e.At):
				// A process that lived (or was stopped with SIGTERM, which
				// hands its jobs back uncharged) was charged a crash. Its
				// heartbeat lapsed: after a store outage that breaks the
				// design's rule (never charge a crash for a lease lost to
				// an outage while the process lives); elsewhere it is a
				// process starved past its heartbeat's TTL, which the
				// others cannot tell from a dead one: counted, reported.
				if o, ok := r.duringOutage(e.At); ok {
					r.violate("%s: crash charged to process %s, which lived (%s), at %s, %s after a store outage of %s ended: %s",
						name, m[1], f, e.At.UTC().Format("15:04:05.000"), e.At.Sub(o[1]).Round(time.Millisecond),
						o[1].Sub(o[0]).Round(time.Millisecond), e.Message)
				} else {
					rep.LiveCharged++
					r.log("note: %s: crash charged to process %s, which lived (%s), away from any outage: its heartbeat lapsed", name, m[1], f)
				}
			}
			order = append(order, f)
		default:
			r.violate("%s: a crash with no known cause: %q", name, e.Message)
		}
	}
	if len(j.Errors) < engine.MaxKeptErrors && crashErrs != j.CrashAttempt {
		r.violate("%s: crash_attempt %d but %d crashes on the record", name, j.CrashAttempt, crashErrs)
	}
	if len(j.Errors) < engine.MaxKeptErrors && otherErrs != j.Attempt {
		r.violate("%s: attempt %d but %d failed attempts on the record", name, j.Attempt, otherErrs)
	}
	if j.Attempt+j.CrashAttempt > int(j.Fence) {
		r.violate("%s: attempt %d and crash_attempt %d charge more runs than its %d claims", name, j.Attempt, j.CrashAttempt, j.Fence)
	}
	if j.CrashAttempt > 0 {
		if innocent(class) {
			r.crashedInnocent[j.ID] = true
		}
		rep.Crashed++
		if j.CrashAttempt >= 2 && innocent(class) {
			rep.CrashedTwice++
		}
	}

	// What the job should have come to.
	if innocent(class) {
		switch j.State {
		case engine.StateCompleted:
		case engine.StateQuarantined:
			if pillThenChance(order) {
				rep.PillThenChance++
				r.log("note: %s: quarantined: two crashes beside a pill, then %s: a fault from outside hit its lone run", name, causes(order))
			} else {
				r.violate("%s: an innocent job wrongly quarantined: crash_attempt %d; its crashes came from %s", name, j.CrashAttempt, causes(order))
			}
		default:
			r.violate("%s: an innocent job ended %s (%s), not completed", name, j.State, j.TerminalReason)
		}
	} else {
		switch {
		case j.State != engine.StateQuarantined:
			r.violate("%s: a poison job ended %s, not quarantined", name, j.State)
		case j.CrashAttempt != r.o.CrashLimit:
			r.violate("%s: quarantined at crash_attempt %d, the limit is %d", name, j.CrashAttempt, r.o.CrashLimit)
		}
	}

	// Claims: one per fence, none beyond the job's.
	claimedBy := map[int64]string{}
	for _, w := range writes {
		if w.op != OpClaim {
			continue
		}
		if prev, dup := claimedBy[w.fence]; dup {
			r.violate("%s: claimed twice under fence %d (by %s and %s)", name, w.fence, prev, w.process)
		}
		claimedBy[w.fence] = w.process
		if w.fence > j.Fence || w.fence < 1 {
			r.violate("%s: a claim under fence %d, the job's fence is %d", name, w.fence, j.Fence)
		}
	}
	if n := int64(len(claimedBy)); n < j.Fence {
		rep.Unrecorded += int(j.Fence - n)
	}
	// Each run saw the counters as the runs before it left them: never
	// more than the job ends with, never less than an earlier run saw; and
	// the run that completed the job was charged nothing after it began.
	sort.Slice(execs, func(a, b int) bool { return execs[a].fence < execs[b].fence })
	for i, x := range execs {
		if x.attempt > j.Attempt || x.crashes > j.CrashAttempt {
			r.violate("%s: its run under fence %d began at attempt %d, crash_attempt %d; the job ends at %d, %d",
				name, x.fence, x.attempt, x.crashes, j.Attempt, j.CrashAttempt)
		}
		if i > 0 && (x.attempt < execs[i-1].attempt || x.crashes < execs[i-1].crashes) {
			r.violate("%s: its run under fence %d began at attempt %d, crash_attempt %d, below fence %d's %d, %d",
				name, x.fence, x.attempt, x.crashes, execs[i-1].fence, execs[i-1].attempt, execs[i-1].crashes)
		}
		if j.State == engine.StateCompleted && x.fence == j.Fence && x.crashes != j.CrashAttempt {
			r.violate("%s: completed by its run under fence %d, which began at crash_attempt %d; the job ends at %d",
				name, x.fence, x.crashes, j.CrashAttempt)
		}
	}
	ran := map[int64]string{}
	for _, x := range execs {
		if prev, dup := ran[x.fence]; dup {
			r.violate("%s: ran twice under fence %d (in %s and %s)", name, x.fence, prev, x.process)
		}
		ran[x.fence] = x.process
		if by, ok := claimedBy[x.fence]; ok && by != x.process {
			r.violate("%s: fence %d claimed by %s but run by %s", name, x.fence, by, x.process)
		}
		if x.fence > j.Fence {
			r.violate("%s: ran under fence %d, the job's fence is %d", name, x.fence, j.Fence)
		}
	}

	// Outcomes: at most one accepted per fence; an accepted success is
	// the last claim's.
	accepted := map[int64]writeRow{}
	completions := 0
	for _, w := range writes {
		if w.op == OpClaim {
			continue
		}
		if !w.accepted {
			rep.Refused++
			continue
		}
		if prev, dup := accepted[w.fence]; dup {
			r.violate("%s: two outcomes accepted under fence %d: %s by %s and %s by %s (a superseded holder's late write got through)",
				name, w.fence, prev.op, prev.process, w.op, w.process)
		}
		accepted[w.fence] = w
		if w.op == OpComplete {
			completions++
			if w.fence != j.Fence {
				r.violate("%s: a success accepted from %s under fence %d, but the job's last claim is fence %d (by %s): a late write of a superseded holder",
					name, w.process, w.fence, j.Fence, claimedBy[j.Fence])
			}
			if j.State != engine.StateCompleted {
				r.violate("%s: a success accepted under fence %d, yet the job is %s", name, w.fence, j.State)
			}
		}
	}
	if completions > 1 {
		r.violate("%s: %d successes accepted", name, completions)
	}
}

// processName is the harness's name of a worker id: the engine adds
// /<8 hex> to the --worker-id it was given, one per incarnation.
func processName(workerID string) string {
	if i := strings.LastIndexByte(workerID, '/'); i >= 0 {
		return workerID[:i]
	}
	return workerID
}

// exitedBefore reports whether process name had exited by t: a crash
// charged after that is a process gone, however it went.
func (r *run) exitedBefore(name string, t time.Time) bool {
	at, ok := r.exitedAt[name]
	return ok && !at.IsZero() && !t.Before(at)
}

// duringOutage finds the outage that t falls in or follows closely: from
// the lock taken to 2 s after it was let go (the writes that waited go
// through then, the reaper's among them).
func (r *run) duringOutage(t time.Time) ([2]time.Time, bool) {
	for _, o := range r.outageAt {
		if !t.Before(o[0]) && t.Before(o[1].Add(2*time.Second)) {
			return o, true
		}
	}
	return [2]time.Time{}, false
}

// pillThenChance reports whether an innocent's crashes (order: the fate
// of the process each was charged to, oldest first) are two pill deaths
// and then only SIGKILLs or stalls from outside. The engine promises an
// innocent at most two crashes from a pill (suspectGate); after them it
// runs alone, and a kill or a stall of that process is charged to it as
// to any job, because nothing tells it from a third pill. This path has
// the chance of one fault hitting one lone run (about crashed2= times the
// report's crash_rate a run, a few percent), not the p³ that AllFaults
// calibrates: it is counted (pill_then_chance=), not a violation. A pill
// death after the second crash (the lone run was not alone), or three
// crashes from outside alone, stay violations.
func pillThenChance(order []string) bool {
	if len(order) < 3 || order[0] != "died" || order[1] != "died" {
		return false
	}
	for _, f := range order[2:] {
		if f != "killed" && f != "stalled" {
			return false
		}
	}
	return true
}

func causes(order []string) string {
	if len(order) == 0 {
		return "nowhere on the record"
	}
	why := map[string]int{}
	for _, f := range order {
		why[f]++
	}
	var ks []string
	for k, n := range why {
		label := map[string]string{"killed": "SIGKILLs", "stalled": "stalls", "died": "pills' deaths", "panic": "its own panics"}[k]
		if label == "" {
			label = k
		}
		ks = append(ks, fmt.Sprintf("%d %s", n, label))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func (r *run) readSide() (map[string][]execRow, map[string][]writeRow, error) {
	db, err := sql.Open("sqlite", sideDSN(r.side))
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	execs := map[string][]execRow{}
	rows, err := db.Query(`SELECT job_id, fence, attempt, crash_attempt, process FROM executions ORDER BY rowid`)
	if err != nil {
		return nil, nil, fmt.Errorf("side table: %w", err)
	}
	for rows.Next() {
		var id string
		var x execRow
		if err := rows.Scan(&id, &x.fence, &x.attempt, &x.crashes, &x.process); err != nil {
			rows.Close()
			return nil, nil, err
		}
		execs[id] = append(execs[id], x)
	}
	rows.Close()
	writes := map[string][]writeRow{}
	rows, err = db.Query(`SELECT op, job_id, fence, process, accepted FROM writes ORDER BY rowid`)
	if err != nil {
		return nil, nil, fmt.Errorf("side table: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var w writeRow
		if err := rows.Scan(&w.op, &id, &w.fence, &w.process, &w.accepted); err != nil {
			return nil, nil, err
		}
		writes[id] = append(writes[id], w)
	}
	return execs, writes, rows.Err()
}
