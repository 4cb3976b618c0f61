package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

type execRow struct {
	fence            int64
	attempt, crashes int
	process          string
	at               time.Time
}

type writeRow struct {
	op       string
	fence    int64
	process  string
	accepted bool
	at       time.Time
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
//   - the maintained counters agree with the jobs, and add up to the jobs
//     enqueued;
//   - a released poison job runs on probation (checkReleases): it ends
//     quarantined again with one crash, the first run after each release
//     that ends charged quarantines it at once, no run under a fence after
//     its quarantine began before its release, and a run before that last
//     one ended uncharged only where its worker did not live through it
//     or the store was away.
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
	released := map[string][]release{}
	for _, rel := range r.releases {
		released[rel.job] = append(released[rel.job], rel)
	}
	seen := map[string]bool{}
	tally := map[engine.State]int64{}
	for _, id := range r.ids {
		if seen[id] {
			r.violate("job %s: enqueued twice under one id", id)
			continue
		}
		seen[id] = true
		var j *engine.Job
		err := r.retry(ctx, "get job", func() error {
			var err error
			j, err = r.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
			return err
		})
		if err != nil {
			r.violate("job %s: %v", id, err)
			continue
		}
		tally[j.State]++
		r.checkJob(j, r.class[id], execs[id], writes[id], fate, released[id])
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
	var total int64
	for _, st := range engine.AllStates {
		if got, want := c.Total[st], tally[st]; got != want {
			r.violate("counters: %d jobs %s, the jobs say %d", got, st, want)
		}
		total += c.Total[st]
	}
	if total != int64(len(seen)) {
		r.violate("counters: %d jobs in all, %d enqueued (a job lost or one too many)", total, len(seen))
	}
	return nil
}

func (r *run) checkJob(j *engine.Job, class string, execs []execRow, writes []writeRow, fate map[string]string, rels []release) {
	rep := r.rep
	name := fmt.Sprintf("job %s (%s)", j.ID, class)
	// A release whose answer was lost and which could not be read back
	// happened if the job was claimed again after it.
	kept := rels[:0:0]
	for _, rel := range rels {
		if !rel.uncertain || j.Fence > rel.fence {
			kept = append(kept, rel)
		}
	}
	rels = kept
	// A release resets the crash counter: the counters the job ends with
	// are those of the runs since its last release, under fences above
	// base. segment numbers the runs between releases.
	var base int64
	if len(rels) > 0 {
		base = rels[len(rels)-1].fence
	}
	segment := func(fence int64) int {
		n := 0
		for _, rel := range rels {
			if fence > rel.fence {
				n++
			}
		}
		return n
	}
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
		if int64(e.Attempt) > base {
			crashErrs++
		}
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
		r.violate("%s: crash_attempt %d but %d crashes on the record since its last release (fence %d)", name, j.CrashAttempt, crashErrs, base)
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
	switch {
	case innocent(class) && len(rels) > 0:
		// The harness releases poison only; an innocent released would
		// have been quarantined by chance, and then it must complete.
		if j.State != engine.StateCompleted {
			r.violate("%s: an innocent job released from quarantine ended %s (%s), not completed", name, j.State, j.TerminalReason)
		}
	case innocent(class):
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
	case len(rels) > 0:
		// Released, it ran on probation: its first crash quarantined it
		// again at once.
		switch {
		case j.State != engine.StateQuarantined:
			r.violate("%s: a poison job released %d times ended %s, not quarantined again", name, len(rels), j.State)
		case j.CrashAttempt != 1:
			r.violate("%s: released (last under fence %d), it ended quarantined at crash_attempt %d; on probation its first crash quarantines it",
				name, base, j.CrashAttempt)
		default:
			rep.Requarantined++
		}
	default:
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
	// A release starts the crash count again: counters are compared
	// within the runs between two releases, and with the job's own only
	// for the runs since the last one.
	sort.Slice(execs, func(a, b int) bool { return execs[a].fence < execs[b].fence })
	for i, x := range execs {
		if x.attempt > j.Attempt || (x.fence > base && x.crashes > j.CrashAttempt) {
			r.violate("%s: its run under fence %d began at attempt %d, crash_attempt %d; the job ends at %d, %d",
				name, x.fence, x.attempt, x.crashes, j.Attempt, j.CrashAttempt)
		}
		if i > 0 && segment(x.fence) == segment(execs[i-1].fence) && (x.attempt < execs[i-1].attempt || x.crashes < execs[i-1].crashes) {
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
	r.checkReleases(j, name, rels, execs, writes, fate)
}

// checkReleases holds a released job to probation. After each release
// (under fence q, the run that quarantined it) up to the run that
// quarantined it again (the next release's fence, or the job's own after
// the last):
//
//   - it ran again: a released job is not lost;
//   - exactly one crash is on the record, the last run's: the first run
//     that ended charged quarantined it at once, whether its handler
//     panicked (the worker's path) or its process died (the reaper's);
//   - no claim and no run under a fence above q began before the release
//     was asked for: nothing ran while it was quarantined and not released;
//   - a run before the last ended uncharged (the crash check above says
//     so), which only a run that lost its lease does: its worker was
//     killed, frozen, stopped or taken down by a pill, or the store was
//     away. A run in a process that lived through, away from any outage,
//     followed by another, is a run on probation that was not charged.
//
// The crash entries are numbered by their run's fence (finishPlan), so the
// record says which run each crash belongs to; a record capped at
// MaxKeptErrors is not read for crashes.
func (r *run) checkReleases(j *engine.Job, name string, rels []release, execs []execRow, writes []writeRow, fate map[string]string) {
	capped := len(j.Errors) >= engine.MaxKeptErrors
	for i, rel := range rels {
		lo, hi := rel.fence, j.Fence
		if i+1 < len(rels) {
			hi = rels[i+1].fence
		}
		how := "released"
		if rel.fingerprint != "" {
			how = "released with its fingerprint " + rel.fingerprint
		}
		when := rel.at.UTC().Format("15:04:05.000")
		if hi <= lo {
			r.violate("%s: %s at %s under fence %d, it never ran again (its fence is %d then)", name, how, when, lo, hi)
			continue
		}
		if !capped {
			var crashes []int
			for _, e := range j.Errors {
				if e.Crash && int64(e.Attempt) > lo && int64(e.Attempt) <= hi {
					crashes = append(crashes, e.Attempt)
				}
			}
			if len(crashes) != 1 || int64(crashes[0]) != hi {
				r.violate("%s: %s at %s under fence %d, it crashed under fences %v before fence %d ended its probation; on probation the first crash quarantines it",
					name, how, when, lo, crashes, hi)
			}
		}
		for _, w := range writes {
			if w.op == OpClaim && w.fence > lo && w.fence <= hi && w.at.Before(rel.at) {
				r.violate("%s: claimed by %s under fence %d at %s, before its release at %s: claimed while quarantined",
					name, w.process, w.fence, w.at.UTC().Format("15:04:05.000"), when)
			}
		}
		ran := map[int64]bool{}
		for _, x := range execs {
			if x.fence <= lo || x.fence > hi {
				continue
			}
			if x.at.Before(rel.at) {
				r.violate("%s: ran in %s under fence %d at %s, before its release at %s: it ran while quarantined",
					name, x.process, x.fence, x.at.UTC().Format("15:04:05.000"), when)
			}
			if x.fence == hi || ran[x.fence] {
				continue
			}
			ran[x.fence] = true
			r.rep.ProbationReruns++
			if f := fate[x.process]; f == "lived" && !r.nearOutage(x.at) {
				r.violate("%s: %s at %s under fence %d, it ran in %s under fence %d, which lived through away from any outage, and ran again up to fence %d: a run on probation that ended uncharged",
					name, how, when, lo, x.process, x.fence, hi)
			}
		}
	}
}

// nearOutage reports whether a run that began at t may have lost its
// lease to a store fault: an outage or a cut under way within the lease
// and the reaper's next passes after t, or ended less than 2 s before it.
func (r *run) nearOutage(t time.Time) bool {
	for _, o := range r.outageAt {
		if o[0].Before(t.Add(5*time.Second)) && t.Before(o[1].Add(2*time.Second)) {
			return true
		}
	}
	return false
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
	rows, err := db.Query(`SELECT job_id, fence, attempt, crash_attempt, process, at_ns FROM executions ORDER BY rowid`)
	if err != nil {
		return nil, nil, fmt.Errorf("side table: %w", err)
	}
	for rows.Next() {
		var id string
		var x execRow
		var at int64
		if err := rows.Scan(&id, &x.fence, &x.attempt, &x.crashes, &x.process, &at); err != nil {
			rows.Close()
			return nil, nil, err
		}
		x.at = time.Unix(0, at)
		execs[id] = append(execs[id], x)
	}
	rows.Close()
	writes := map[string][]writeRow{}
	rows, err = db.Query(`SELECT op, job_id, fence, process, accepted, at_ns FROM writes ORDER BY rowid`)
	if err != nil {
		return nil, nil, fmt.Errorf("side table: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var w writeRow
		var at int64
		if err := rows.Scan(&w.op, &id, &w.fence, &w.process, &w.accepted, &at); err != nil {
			return nil, nil, err
		}
		w.at = time.Unix(0, at)
		writes[id] = append(writes[id], w)
	}
	return execs, writes, rows.Err()
}
