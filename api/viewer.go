package api

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// What a viewer may read. A viewer sees the shape of the work — ids,
// queues, kinds, states, times, attempts, actors, counts — and none of
// its data: no payload, metadata or checkpoint (so no step results or
// signal payloads), no payload value in a timeline message or an
// operation's selector, and no real fingerprint, since a fingerprint is
// an unkeyed hash of the payload and confirms a guessed one. Error text
// is shown unless the server hides it (ServerOptions.HideErrorsFromViewers).
// Inspectors and up read everything. Every answer a viewer gets passes
// through one of the functions below; RELIABILITY.md, "Who sees what",
// is the table.

// HiddenValue stands, for viewers, in place of a payload or meta
// condition's value in an operation's selector, and of error text when
// the server hides it (engine.HiddenValue, which the console reads).
const HiddenValue = engine.HiddenValue

// hiddenEdit is a payload_edited entry's message for viewers: the entry
// says what changed, values included.
const hiddenEdit = "payload edited (what changed is hidden for your role)"

// viewPolicy is what a server hides from viewers beyond payloads: the
// key of their fingerprint ids, and whether error text is hidden.
type viewPolicy struct {
	fp         cipher.Block
	hideErrors bool
}

// newViewPolicy draws the server's fingerprint key: viewers' fingerprint
// ids last as long as the server process.
func newViewPolicy(hideErrors bool) *viewPolicy {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("api: no randomness for the viewers' fingerprint key: " + err.Error())
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		panic(err)
	}
	return &viewPolicy{fp: b, hideErrors: hideErrors}
}

// fingerprintOut is the id a viewer sees for fingerprint fp: its 32 bytes
// enciphered under the server's key, as 64 hex digits like a fingerprint.
// The same fingerprint always gives the same id (a viewer can still group
// jobs and follow the quarantine list to its jobs), and without the key
// no guessed payload can be checked against it.
func (v *viewPolicy) fingerprintOut(fp string) string {
	return v.fingerprintMap(fp, v.fp.Encrypt)
}

// fingerprintIn is the fingerprint a viewer's id stands for. Anything
// else a viewer sends, a real fingerprint included, deciphers to a value
// that names no job.
func (v *viewPolicy) fingerprintIn(id string) string {
	return v.fingerprintMap(id, v.fp.Decrypt)
}

func (v *viewPolicy) fingerprintMap(s string, f func(dst, src []byte)) string {
	if s == "" {
		return ""
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		// Not a fingerprint: nothing a viewer may read.
		return HiddenValue
	}
	f(b[:16], b[:16])
	f(b[16:], b[16:])
	return hex.EncodeToString(b)
}

// viewer reports whether c reads as a viewer (below inspector).
func (c *caller) viewer() bool { return !c.can(engine.RoleInspector) }

// hideErrors reports whether c may not read error text.
func (c *caller) hideErrors() bool { return c.viewer() && c.view.hideErrors }

// errorText is s as c may read it.
func (c *caller) errorText(s string) string {
	if s != "" && c.hideErrors() {
		return HiddenValue
	}
	return s
}

// checkFilter refuses payload and meta filters to callers who may not see
// payloads and metadata (a filter could probe them), unique-key filters
// for the same reason, and error-text
// filters when error text is hidden from them; a viewer's fingerprint
// condition is mapped from its id to the fingerprint, in place.
func checkFilter(c *caller, f *engine.Filter) error {
	if !c.viewer() {
		return nil
	}
	if len(f.Payload) > 0 || !scheduleMetaOnly(f.Meta) {
		return c.need(engine.RoleInspector, "filter on payload or metadata")
	}
	if f.UniqueKey != "" {
		// A key hashes payload fields: a viewer could confirm a guess.
		return c.need(engine.RoleInspector, "filter on unique key")
	}
	if c.hideErrors() && (f.Error != "" || f.ErrorPattern != "") {
		return c.need(engine.RoleInspector, "filter on error text (this server hides it from viewers)")
	}
	f.Fingerprint = c.view.fingerprintIn(f.Fingerprint)
	return nil
}

// scheduleMetaOnly reports whether every metadata condition is on the
// schedule a periodic job came from (engine.ScheduleJobsQuery): the
// engine writes that key, a viewer sees the schedules' names anyway, and
// the console's Schedules screen lists a schedule's dead jobs by it.
func scheduleMetaOnly(ms []engine.PathMatch) bool {
	for _, m := range ms {
		if m.Path != engine.ScheduleMetaPath {
			return false
		}
	}
	return true
}

// redactJob strips what c may not read from a job. It copies; j is not
// changed.
func redactJob(c *caller, j *engine.Job) *engine.Job {
	if j == nil || !c.viewer() {
		return j
	}
	cp := *j
	cp.Payload, cp.Metadata, cp.Checkpoint = nil, nil, nil
	cp.Fingerprint = c.view.fingerprintOut(j.Fingerprint)
	// A unique key hashes payload fields (UniqueOpts.Fields), which a
	// viewer may not read: whoever reads it can confirm a guessed value.
	cp.UniqueKey = ""
	if c.hideErrors() && len(j.Errors) > 0 {
		cp.Errors = make([]engine.AttemptError, len(j.Errors))
		for i, e := range j.Errors {
			e.Message, e.Trace = c.errorText(e.Message), ""
			cp.Errors[i] = e
		}
	}
	return &cp
}

func redactAll(c *caller, js []*engine.Job) []*engine.Job {
	if !c.viewer() {
		return js
	}
	out := make([]*engine.Job, len(js))
	for i, j := range js {
		out[i] = redactJob(c, j)
	}
	return out
}

// redactDetail strips what c may not read from a job's detail: the job,
// and the timeline's messages that carry its data — a payload edit's
// diff always, every message when error text is hidden (a failure's
// message is its error, and the engine's own messages quote errors).
func redactDetail(c *caller, d *engine.JobDetail) *engine.JobDetail {
	if d == nil || !c.viewer() {
		return d
	}
	cp := *d
	cp.Job = redactJob(c, d.Job)
	cp.Timeline = make([]engine.Event, len(d.Timeline))
	for i, e := range d.Timeline {
		switch {
		case e.Kind == engine.EventPayloadEdited:
			e.Message = hiddenEdit
		case c.hideErrors():
			e.Message = c.errorText(e.Message)
		}
		cp.Timeline[i] = e
	}
	return &cp
}

// redactOperation hides from c the values of payload and meta conditions
// in an operation's selector (they could be personal data), its
// fingerprint, and, when error text is hidden, its error conditions and
// error. The conditions stay, with HiddenValue for their values: without
// them a retry of one customer's jobs read as a retry of every archived
// job.
func redactOperation(c *caller, op *engine.Operation) *engine.Operation {
	if op == nil || !c.viewer() {
		return op
	}
	cp := *op
	cp.Selector = redactSelector(c, op.Selector)
	cp.Error = c.errorText(op.Error)
	if op.Canary != nil {
		// A halt's reason quotes a job's error.
		cc := *op.Canary
		cc.Reason = c.errorText(cc.Reason)
		cp.Canary = &cc
	}
	return &cp
}

// redactSelector is a filter as c may read it.
func redactSelector(c *caller, f engine.Filter) engine.Filter {
	hide := func(ms []engine.PathMatch) []engine.PathMatch {
		if ms == nil {
			return nil
		}
		out := make([]engine.PathMatch, len(ms))
		for i, m := range ms {
			out[i] = engine.PathMatch{Path: m.Path, Value: HiddenValue}
		}
		return out
	}
	f.Payload, f.Meta = hide(f.Payload), hide(f.Meta)
	f.Fingerprint = c.view.fingerprintOut(f.Fingerprint)
	f.Error, f.ErrorPattern = c.errorText(f.Error), c.errorText(f.ErrorPattern)
	return f
}

// redactPlan strips step results (the job's data, as its payload is)
// and, when error text is hidden, step errors from a replay preview.
func redactPlan(c *caller, p *engine.ReplayPlan) *engine.ReplayPlan {
	if p == nil || !c.viewer() {
		return p
	}
	out := &engine.ReplayPlan{Kept: append([]engine.StepRecord{}, p.Kept...), Rerun: append([]engine.StepRecord{}, p.Rerun...)}
	for _, rs := range [][]engine.StepRecord{out.Kept, out.Rerun} {
		for i := range rs {
			rs[i].Result = nil
			rs[i].Error = c.errorText(rs[i].Error)
		}
	}
	return out
}

// redactFingerprints is the quarantine list as c may read it: each
// record under the fingerprint's id, its last error hidden when error
// text is.
func redactFingerprints(c *caller, fps []*engine.Fingerprint) []*engine.Fingerprint {
	if !c.viewer() {
		return fps
	}
	out := make([]*engine.Fingerprint, len(fps))
	for i, f := range fps {
		cp := *f
		cp.Fingerprint = c.view.fingerprintOut(f.Fingerprint)
		cp.LastError = c.errorText(f.LastError)
		out[i] = &cp
	}
	return out
}

// redactErrorGroups is the error groups as c may read them: the
// selector's fingerprint as its id and, when error text is hidden, the
// pattern, sample and note hidden (the counts by queue and kind stay) and no
// near-singleton count, which says how the hidden texts relate (these
// differ in one word).
func redactErrorGroups(c *caller, gs []engine.ErrorGroup) []engine.ErrorGroup {
	if !c.viewer() {
		return gs
	}
	out := make([]engine.ErrorGroup, len(gs))
	for i, g := range gs {
		// The note is an operator's word on the failure, and may quote it.
		g.Pattern, g.Sample, g.Note = c.errorText(g.Pattern), c.errorText(g.Sample), c.errorText(g.Note)
		g.Selector = redactSelector(c, g.Selector)
		if c.hideErrors() {
			g.NearSingletons = 0
		}
		out[i] = g
	}
	return out
}

// redactAudit is a record as c may read it: a viewer reads who did what
// and when, never a value — a selector's values hidden as an operation's
// are, no detail (an error's text may quote the data), no source address.
func redactAudit(c *caller, r *engine.AuditRecord) *engine.AuditRecord {
	if !c.viewer() {
		return r
	}
	cp := *r
	if cp.Selector != "" {
		if f, err := engine.ParseQuery(cp.Selector); err == nil {
			cp.Selector = redactSelector(c, f).String()
		} else {
			cp.Selector = HiddenValue
		}
	}
	if strings.HasPrefix(cp.Action, "release_fingerprint") {
		cp.Target = c.view.fingerprintOut(cp.Target)
	}
	cp.Detail, cp.Source = "", ""
	return &cp
}
