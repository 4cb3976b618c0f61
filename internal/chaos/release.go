package chaos

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
)

// release is one operator release the harness made, for the checker
// (checkReleases): a released job runs on probation, and its next crash
// quarantines it again at once.
type release struct {
	job string
	// fence is the job's fence when it was released: the run that
	// quarantined it. Every claim after the release has a greater one.
	fence int64
	// at is when the harness asked, before the call: no run under a
	// greater fence may begin before it.
	at time.Time
	// fingerprint is set when the whole fingerprint was released
	// (ReleaseFingerprint), not the job alone (ReleaseJob).
	fingerprint string
	// uncertain: the answer was lost and the job could not be read
	// back; the checker takes it as released only if the job ran again.
	uncertain bool
}

// releaseInterval is the time to the next release: uniform on
// [ReleaseEvery/2, 3/2 ReleaseEvery], by default a release for every four
// faults or so.
func (r *run) releaseInterval(rng *rand.Rand) time.Duration {
	m := int64(r.o.ReleaseEvery)
	return time.Duration(m/2 + rng.Int64N(m+1))
}

// release acts as an operator: it lists the run's quarantined poison jobs
// and releases the one pick selects, with its whole fingerprint when whole
// is set. Nothing quarantined yet, or a store that does not answer, and
// there is no release this time.
func (r *run) release(ctx context.Context, pick uint64, whole bool) {
	page, err := r.e.ListJobs(ctx, engine.ListJobsParams{Limit: 200, Filter: engine.Filter{
		States: []engine.State{engine.StateQuarantined}, Queues: []string{r.queue}, Kinds: []string{KindPanic, KindExit}}})
	if err != nil {
		r.log("release: list the quarantined jobs: %v", err)
		return
	}
	var cands []*engine.Job
	r.mu.Lock()
	for _, j := range page.Jobs {
		if c := r.class[j.ID]; c == classPanicN || c == classPill {
			cands = append(cands, j)
		}
	}
	r.mu.Unlock()
	if len(cands) == 0 {
		r.log("release: no quarantined poison job yet")
		return
	}
	id := cands[pick%uint64(len(cands))].ID
	// The fence from the job itself, read now: while it is quarantined
	// nothing claims it, so this is the fence it was quarantined under.
	j, err := r.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
	if err != nil || j.State != engine.StateQuarantined {
		r.log("release: job %s: %v (state %v)", id, err, stateOf(j))
		return
	}
	rel := release{job: id, fence: j.Fence, at: time.Now()}
	if whole {
		rel.fingerprint = j.Fingerprint
		var n int
		n, err = r.e.ReleaseFingerprint(ctx, j.Fingerprint)
		if err == nil && n == 0 {
			r.log("release: fingerprint %s of job %s: no job released", j.Fingerprint, id)
			return
		}
	} else {
		_, err = r.e.ReleaseJob(ctx, id)
	}
	if err != nil {
		if answered(err) {
			r.log("release: job %s: %v", id, err)
			return
		}
		// The answer was lost (a cut, a restart): the job says whether
		// the release landed. Still quarantined under the same fence, it
		// did not: a released job leaves quarantine, and only a claim,
		// which grows the fence, can bring it back.
		var after *engine.Job
		if rerr := r.retry(ctx, "get job", func() error {
			var err error
			after, err = r.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id})
			return err
		}); rerr != nil {
			rel.uncertain = true
		} else if after.State == engine.StateQuarantined && after.Fence == rel.fence {
			r.log("release: job %s: %v (not released)", id, err)
			return
		}
	}
	r.mu.Lock()
	r.releases = append(r.releases, rel)
	r.rep.Releases++
	if whole {
		r.rep.FingerprintReleases++
	}
	r.mu.Unlock()
	what := "job"
	if whole {
		what = "fingerprint " + rel.fingerprint + " of job"
	}
	r.log("%s release %s %s (%s, quarantined under fence %d)", rel.at.UTC().Format("15:04:05.000"), what, id, r.classOf(id), rel.fence)
}

func (r *run) classOf(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.class[id]
}

func stateOf(j *engine.Job) engine.State {
	if j == nil {
		return ""
	}
	return j.State
}
