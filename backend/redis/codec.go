package redis

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sluicetype"
)

// Between Go values and the strings the scripts keep.

// tstr is a time as the scripts keep it: 19 digits of unix nanoseconds.
func tstr(t time.Time) string {
	// Outside what nanoseconds since 1970 hold in an int64, UnixNano
	// wraps: both ends are clamped before it is taken.
	switch {
	case t.After(maxTime):
		t = maxTime
	case t.Before(time.Unix(0, 0)):
		t = time.Unix(0, 0)
	}
	return fmt.Sprintf("%019d", t.UnixNano())
}

var maxTime = time.Unix(0, 1<<63-1).UTC()

// tptr is tstr of t, or "" for nil.
func tptr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return tstr(*t)
}

// ttime reads a time the scripts kept; "" (a missing field) is the Unix
// epoch.
func ttime(s string) (time.Time, error) {
	n, err := atoi64(s)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, n).UTC(), nil
}

// ttimePtr is ttime, or nil for "".
func ttimePtr(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := ttime(s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// dstr is a duration as the scripts add it: "seconds:nanoseconds" with the
// nanoseconds in [0, 1e9).
func dstr(d time.Duration) string {
	s, ns := int64(d/time.Second), int64(d%time.Second)
	if ns < 0 {
		ns += int64(time.Second)
		s--
	}
	return strconv.FormatInt(s, 10) + ":" + strconv.FormatInt(ns, 10)
}

// tadd is the scripts' tadd on a time they sent: t plus d, clamped as
// they clamp (so a lease expiry computed here is the one they stored).
func tadd(t string, d time.Duration) (string, error) {
	n, err := atoi64(t)
	if err != nil {
		return "", err
	}
	s, ns := n/1e9, n%1e9
	ds, dns := int64(d/time.Second), int64(d%time.Second)
	if dns < 0 {
		dns += 1e9
		ds--
	}
	s, ns = s+ds, ns+dns
	if ns >= 1e9 {
		ns -= 1e9
		s++
	}
	if s < 0 {
		return "0000000000000000000", nil
	}
	if s > 9999999999 {
		s = 9999999999
	}
	return fmt.Sprintf("%010d%09d", s, ns), nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

const us = "\x1f"

func joinStates(ss []sluicetype.State) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	return strings.Join(names, us)
}

// fieldMap reads a flat [field, value, ...] reply.
func fieldMap(v any) map[string]string {
	arr, _ := v.([]any)
	m := make(map[string]string, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		k, _ := arr[i].(string)
		val, _ := arr[i+1].(string)
		m[k] = val
	}
	return m
}

// atoi and atoi64 read the scripts' integers; a missing field is 0. The
// empty string is answered before strconv, whose error for it allocates
// (a claimed job has several empty fields).
func atoi(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.Atoi(s)
}

func atoi64(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// fieldErr is a field that would not parse, named by its hash field.
func fieldErr(field string, err error) error {
	return fmt.Errorf("field %s: %w", field, err)
}

// hashReader reads the fields of a hash the scripts wrote, keeping the
// first one that would not parse (err) rather than reading it as zero.
type hashReader struct {
	m   map[string]string
	err error
}

func (r *hashReader) fail(f string, err error) {
	if err != nil && r.err == nil {
		r.err = fieldErr(f, err)
	}
}

func (r *hashReader) int(f string) int {
	n, err := atoi(r.m[f])
	r.fail(f, err)
	return n
}

func (r *hashReader) int64(f string) int64 {
	n, err := atoi64(r.m[f])
	r.fail(f, err)
	return n
}

func (r *hashReader) time(f string) time.Time {
	t, err := ttime(r.m[f])
	r.fail(f, err)
	return t
}

func (r *hashReader) timePtr(f string) *time.Time {
	t, err := ttimePtr(r.m[f])
	r.fail(f, err)
	return t
}

// jobDecoder builds an sluicetype.Job from its hash's fields, one pair at a
// time, in whatever order they come: replies send a job as flat pairs, and
// building a map of them first cost more than the rest of a claim's
// decoding (a claim of 100 jobs made 100 maps of 30-odd entries).
type jobDecoder struct {
	j                          sluicetype.Job
	payload                    bool
	tags, leaseID, leaseWorker string
	leaseExpires               string
	// err is the first field that would not parse.
	err error
}

// newJobDecoder starts a job; payload false leaves the payload out. The
// times a job always has read as the Unix epoch when their field is
// missing, as an empty field does.
func newJobDecoder(payload bool) jobDecoder {
	epoch := time.Unix(0, 0).UTC()
	return jobDecoder{payload: payload, j: sluicetype.Job{ScheduledAt: epoch, CreatedAt: epoch, StateChangedAt: epoch}}
}

// set takes one field of the job hash (jobFields); a value that would not
// parse is kept as the decoding's error (d.err), which job returns.
func (d *jobDecoder) set(k, v string) {
	j := &d.j
	var err error
	switch k {
	case fID:
		j.ID = v
	case fQueue:
		j.Queue = v
	case fKind:
		j.Kind = v
	case fSchemaVersion:
		j.SchemaVersion, err = atoi(v)
	case fPriority:
		j.Priority, err = atoi(v)
	case fState:
		j.State = sluicetype.State(v)
	case fAttempt:
		j.Attempt, err = atoi(v)
	case fMaxAttempts:
		j.MaxAttempts, err = atoi(v)
	case fCrashAttempt:
		j.CrashAttempt, err = atoi(v)
	case fFingerprint:
		j.Fingerprint = v
	case fFence:
		j.Fence, err = atoi64(v)
	case fScheduledAt:
		j.ScheduledAt, err = ttime(v)
	case fDeadline:
		j.Deadline, err = ttimePtr(v)
	case fTimeout:
		var n int64
		n, err = atoi64(v)
		j.Timeout = time.Duration(n)
	case fCreatedAt:
		j.CreatedAt, err = ttime(v)
	case fAttemptedAt:
		j.AttemptedAt, err = ttimePtr(v)
	case fAttemptedBy:
		j.AttemptedBy = v
	case fStateChangedAt:
		j.StateChangedAt, err = ttime(v)
	case fFinalizedAt:
		j.FinalizedAt, err = ttimePtr(v)
	case fReason:
		j.TerminalReason = sluicetype.TerminalReason(v)
	case fVersion:
		j.Version, err = atoi64(v)
	case fDeadLetterOf:
		j.DeadLetterOf = v
	case fRetryOf:
		j.RetryOf = v
	case fSupersededBy:
		j.SupersededBy = v
	case fUniqueKey:
		j.UniqueKey = v
	case fPayload:
		if d.payload && v != "" {
			j.Payload = json.RawMessage(v)
		} else {
			j.Payload = nil
		}
	case fMetadata:
		j.Metadata = nil
		if v != "" {
			j.Metadata = json.RawMessage(v)
		}
	case fCheckpoint:
		j.Checkpoint = nil
		if v != "" {
			j.Checkpoint = json.RawMessage(v)
		}
	case fTags:
		d.tags = v
	case fLeaseID:
		d.leaseID = v
	case fLeaseWorker:
		d.leaseWorker = v
	case fLeaseExpires:
		d.leaseExpires = v
	}
	if err != nil && d.err == nil {
		d.err = fieldErr(k, err)
	}
}

// job ends the decoding; errs are the job's error entries.
func (d *jobDecoder) job(errs []string) (*sluicetype.Job, error) {
	j := d.j
	if d.err != nil {
		return nil, fmt.Errorf("job %s: %w", j.ID, d.err)
	}
	if tg := d.tags; tg != "" && tg != "[]" && tg != "null" {
		if err := json.Unmarshal([]byte(tg), &j.Tags); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, fieldErr(fTags, err))
		}
	}
	if d.leaseID != "" {
		x, err := ttime(d.leaseExpires)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, fieldErr(fLeaseExpires, err))
		}
		j.Lease = &sluicetype.Lease{ID: d.leaseID, WorkerID: d.leaseWorker, Fence: j.Fence, ExpiresAt: x}
	}
	for _, e := range errs {
		ae, err := errorFrom(e)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		j.Errors = append(j.Errors, ae)
	}
	return &j, nil
}

// jobFrom turns a job hash into an sluicetype.Job; errs are its error entries.
func jobFrom(m map[string]string, errs []string) (*sluicetype.Job, error) {
	d := newJobDecoder(true)
	for k, v := range m {
		d.set(k, v)
	}
	return d.job(errs)
}

// errorEntry is an error entry as the scripts append it: its JSON without
// the time, which the script puts in front (errorFrom reads both).
func errorEntry(e sluicetype.AttemptError) (string, error) {
	e.At = time.Time{}
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func errorFrom(s string) (sluicetype.AttemptError, error) {
	var e sluicetype.AttemptError
	if len(s) < 19 {
		return e, fmt.Errorf("bad error entry %q", s)
	}
	if err := json.Unmarshal([]byte(s[19:]), &e); err != nil {
		return e, fmt.Errorf("error entry: %w", err)
	}
	at, err := ttime(s[:19])
	if err != nil {
		return e, fmt.Errorf("error entry: time: %w", err)
	}
	e.At = at
	return e, nil
}

// jobReply reads a script's {fields, errors} pair.
func jobReply(v any, payload bool) (*sluicetype.Job, error) {
	pair, _ := v.([]any)
	if len(pair) != 2 {
		return nil, fmt.Errorf("redis: job reply of %d values", len(pair))
	}
	d := newJobDecoder(payload)
	fields, _ := pair[0].([]any)
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		val, _ := fields[i+1].(string)
		d.set(k, val)
	}
	return d.job(strs(pair[1]))
}

func strs(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// eventFrom reads one stored timeline event.
func eventFrom(jobID, s string) (sluicetype.Event, error) {
	f := strings.SplitN(s, us, 7)
	for len(f) < 7 {
		f = append(f, "")
	}
	at, err := ttime(f[0])
	if err != nil {
		return sluicetype.Event{}, fmt.Errorf("event of job %s: time: %w", jobID, err)
	}
	n, err := atoi(f[5])
	if err != nil {
		return sluicetype.Event{}, fmt.Errorf("event of job %s: attempt: %w", jobID, err)
	}
	return sluicetype.Event{JobID: jobID, At: at, Kind: sluicetype.EventKind(f[1]), Actor: f[2],
		From: sluicetype.State(f[3]), To: sluicetype.State(f[4]), Attempt: n, Message: f[6]}, nil
}

// dec reads the scripts' length-prefixed encoding (enc in luaLib).
func dec(s string) ([]string, error) {
	var out []string
	for len(s) > 0 {
		c := strings.IndexByte(s, ':')
		if c < 0 {
			return nil, fmt.Errorf("redis: bad record")
		}
		n, err := strconv.Atoi(s[:c])
		if err != nil {
			return nil, fmt.Errorf("redis: bad record: length: %w", err)
		}
		if n < 0 || c+1+n > len(s) {
			return nil, fmt.Errorf("redis: bad record: %d bytes where %d are left", n, len(s)-c-1)
		}
		out = append(out, s[c+1:c+1+n])
		s = s[c+1+n:]
	}
	return out, nil
}

// recordJob reads a job a script recorded for an idempotency step.
func recordJob(s string) (*sluicetype.Job, error) {
	parts, err := dec(s)
	if err != nil {
		return nil, fmt.Errorf("redis: job record: %w", err)
	}
	if len(parts) != 2 {
		return nil, fmt.Errorf("redis: bad job record of %d parts", len(parts))
	}
	fl, err := dec(parts[0])
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(fl)/2)
	for i := 0; i+1 < len(fl); i += 2 {
		m[fl[i]] = fl[i+1]
	}
	es, err := dec(parts[1])
	if err != nil {
		return nil, err
	}
	return jobFrom(m, es)
}

func sliceMap(fl []string) map[string]string {
	m := make(map[string]string, len(fl)/2)
	for i := 0; i+1 < len(fl); i += 2 {
		m[fl[i]] = fl[i+1]
	}
	return m
}

// errPacked is a MessagePack reply this package cannot read.
var errPacked = errors.New("bad packed reply")

// packedReader reads, in place, what the scripts' cmsgpack.pack makes of
// nested tables of strings: arrays and strings, nothing else. Strings are
// slices of the reply, not copies.
type packedReader struct {
	s string
}

// array reads an array's length; an empty table, which cmsgpack packs as
// an empty map, is an empty array.
func (r *packedReader) array() (int, error) {
	if r.s == "" {
		return 0, errPacked
	}
	b := r.s[0]
	n, head := 0, 1
	switch {
	case b >= 0x90 && b <= 0x9f:
		n = int(b & 0x0f)
	case b == 0xdc:
		if len(r.s) < 3 {
			return 0, errPacked
		}
		n, head = int(binary.BigEndian.Uint16([]byte(r.s[1:3]))), 3
	case b == 0xdd:
		if len(r.s) < 5 {
			return 0, errPacked
		}
		n, head = int(binary.BigEndian.Uint32([]byte(r.s[1:5]))), 5
	case b == 0x80:
	default:
		return 0, fmt.Errorf("%w: type byte %#x where an array was due", errPacked, b)
	}
	r.s = r.s[head:]
	if n > len(r.s) { // every element takes a byte at least
		return 0, errPacked
	}
	return n, nil
}

// str reads a string.
func (r *packedReader) str() (string, error) {
	if r.s == "" {
		return "", errPacked
	}
	b := r.s[0]
	n, head := 0, 1
	switch {
	case b >= 0xa0 && b <= 0xbf: // fixstr
		n = int(b & 0x1f)
	case b == 0xd9 || b == 0xc4: // str8, bin8
		if len(r.s) < 2 {
			return "", errPacked
		}
		n, head = int(r.s[1]), 2
	case b == 0xda || b == 0xc5: // str16, bin16
		if len(r.s) < 3 {
			return "", errPacked
		}
		n, head = int(binary.BigEndian.Uint16([]byte(r.s[1:3]))), 3
	case b == 0xdb || b == 0xc6: // str32, bin32
		if len(r.s) < 5 {
			return "", errPacked
		}
		n, head = int(binary.BigEndian.Uint32([]byte(r.s[1:5]))), 5
	default:
		return "", fmt.Errorf("%w: type byte %#x where a string was due", errPacked, b)
	}
	if len(r.s) < head+n {
		return "", errPacked
	}
	v := r.s[head : head+n]
	r.s = r.s[head+n:]
	return v, nil
}

// unpackJobs reads a packed array of jobs, each a {fields, errors} pair as
// jobReply reads it unpacked.
func unpackJobs(packed string, payload bool) ([]*sluicetype.Job, error) {
	r := &packedReader{s: packed}
	n, err := r.array()
	if err != nil {
		return nil, err
	}
	jobs := make([]*sluicetype.Job, 0, n)
	for range n {
		if m, err := r.array(); err != nil {
			return nil, err
		} else if m != 2 {
			return nil, fmt.Errorf("redis: job reply of %d values", m)
		}
		f, err := r.array()
		if err != nil {
			return nil, err
		}
		d := newJobDecoder(payload)
		for i := 0; i < f; i += 2 {
			k, err := r.str()
			if err != nil {
				return nil, err
			}
			if i+1 == f {
				break // an odd field out, as fieldMap leaves it
			}
			v, err := r.str()
			if err != nil {
				return nil, err
			}
			d.set(k, v)
		}
		e, err := r.array()
		if err != nil {
			return nil, err
		}
		var errs []string
		for range e {
			x, err := r.str()
			if err != nil {
				return nil, err
			}
			errs = append(errs, x)
		}
		j, err := d.job(errs)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if r.s != "" {
		return nil, fmt.Errorf("%w: %d bytes past its end", errPacked, len(r.s))
	}
	return jobs, nil
}
