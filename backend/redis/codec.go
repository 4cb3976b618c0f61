package redis

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Between Go values and the strings the scripts keep.

// tstr is a time as the scripts keep it: 19 digits of unix nanoseconds.
func tstr(t time.Time) string {
	if t.After(maxTime) {
		t = maxTime // past what nanoseconds since 1970 hold in an int64
	}
	n := t.UnixNano()
	if n < 0 {
		n = 0
	}
	return fmt.Sprintf("%019d", n)
}

var maxTime = time.Unix(0, 1<<63-1).UTC()

// tptr is tstr of t, or "" for nil.
func tptr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return tstr(*t)
}

// ttime reads a time the scripts kept.
func ttime(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n).UTC()
}

func ttimePtr(s string) *time.Time {
	if s == "" {
		return nil
	}
	t := ttime(s)
	return &t
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
func tadd(t string, d time.Duration) string {
	n := atoi64(t)
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
		return "0000000000000000000"
	}
	if s > 9999999999 {
		s = 9999999999
	}
	return fmt.Sprintf("%010d%09d", s, ns)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

const us = "\x1f"

func joinStates(ss []engine.State) string {
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

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// jobFrom turns a job hash into an engine.Job; errs are its error entries.
func jobFrom(m map[string]string, errs []string) (*engine.Job, error) {
	j := &engine.Job{
		ID:             m["id"],
		Queue:          m["q"],
		Kind:           m["k"],
		SchemaVersion:  atoi(m["sv"]),
		Priority:       atoi(m["pr"]),
		State:          engine.State(m["s"]),
		Attempt:        atoi(m["a"]),
		MaxAttempts:    atoi(m["ma"]),
		CrashAttempt:   atoi(m["c"]),
		Fingerprint:    m["fp"],
		Fence:          atoi64(m["f"]),
		ScheduledAt:    ttime(m["sch"]),
		Deadline:       ttimePtr(m["dl"]),
		Timeout:        time.Duration(atoi64(m["to"])),
		CreatedAt:      ttime(m["cr"]),
		AttemptedAt:    ttimePtr(m["ata"]),
		AttemptedBy:    m["atb"],
		StateChangedAt: ttime(m["sca"]),
		FinalizedAt:    ttimePtr(m["fin"]),
		TerminalReason: engine.TerminalReason(m["rs"]),
		Version:        atoi64(m["v"]),
		DeadLetterOf:   m["dlo"],
		RetryOf:        m["ro"],
		SupersededBy:   m["sb"],
	}
	if p, ok := m["p"]; ok && p != "" {
		j.Payload = json.RawMessage(p)
	}
	if md := m["m"]; md != "" {
		j.Metadata = json.RawMessage(md)
	}
	if cp := m["cp"]; cp != "" {
		j.Checkpoint = json.RawMessage(cp)
	}
	if tg := m["tg"]; tg != "" && tg != "[]" && tg != "null" {
		if err := json.Unmarshal([]byte(tg), &j.Tags); err != nil {
			return nil, fmt.Errorf("job %s: tags: %w", j.ID, err)
		}
	}
	if m["lid"] != "" {
		j.Lease = &engine.Lease{ID: m["lid"], WorkerID: m["lw"], Fence: j.Fence, ExpiresAt: ttime(m["lx"])}
	}
	for _, e := range errs {
		ae, err := errorFrom(e)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
		j.Errors = append(j.Errors, ae)
	}
	return j, nil
}

// errorEntry is an error entry as the scripts append it: its JSON without
// the time, which the script puts in front (errorFrom reads both).
func errorEntry(e engine.AttemptError) (string, error) {
	e.At = time.Time{}
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func errorFrom(s string) (engine.AttemptError, error) {
	var e engine.AttemptError
	if len(s) < 19 {
		return e, fmt.Errorf("bad error entry %q", s)
	}
	if err := json.Unmarshal([]byte(s[19:]), &e); err != nil {
		return e, fmt.Errorf("error entry: %w", err)
	}
	e.At = ttime(s[:19])
	return e, nil
}

// jobReply reads a script's {fields, errors} pair.
func jobReply(v any, payload bool) (*engine.Job, error) {
	pair, _ := v.([]any)
	if len(pair) != 2 {
		return nil, fmt.Errorf("redis: job reply of %d values", len(pair))
	}
	m := fieldMap(pair[0])
	if !payload {
		delete(m, "p")
	}
	return jobFrom(m, strs(pair[1]))
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
func eventFrom(jobID, s string) engine.Event {
	f := strings.SplitN(s, us, 7)
	for len(f) < 7 {
		f = append(f, "")
	}
	return engine.Event{JobID: jobID, At: ttime(f[0]), Kind: engine.EventKind(f[1]), Actor: f[2],
		From: engine.State(f[3]), To: engine.State(f[4]), Attempt: atoi(f[5]), Message: f[6]}
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
		if err != nil || c+1+n > len(s) {
			return nil, fmt.Errorf("redis: bad record")
		}
		out = append(out, s[c+1:c+1+n])
		s = s[c+1+n:]
	}
	return out, nil
}

// recordJob reads a job a script recorded for an idempotency step.
func recordJob(s string) (*engine.Job, error) {
	parts, err := dec(s)
	if err != nil || len(parts) != 2 {
		return nil, fmt.Errorf("redis: bad job record")
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

// unpackStrings reads what the scripts' cmsgpack.pack makes of nested
// tables of strings: arrays ([]any) and strings, the shape a reply of the
// same tables would have had.
func unpackStrings(s string) (any, error) {
	v, rest, err := unpackValue(s, 0)
	if err != nil {
		return nil, err
	}
	if rest != "" {
		return nil, fmt.Errorf("%w: %d bytes past its end", errPacked, len(rest))
	}
	return v, nil
}

func unpackValue(s string, depth int) (any, string, error) {
	if s == "" || depth > 16 {
		return nil, "", errPacked
	}
	b := s[0]
	n, head := 0, 1
	switch {
	case b >= 0xa0 && b <= 0xbf: // fixstr
		n = int(b & 0x1f)
	case b == 0xd9 || b == 0xc4: // str8, bin8
		if len(s) < 2 {
			return nil, "", errPacked
		}
		n, head = int(s[1]), 2
	case b == 0xda || b == 0xc5: // str16, bin16
		if len(s) < 3 {
			return nil, "", errPacked
		}
		n, head = int(binary.BigEndian.Uint16([]byte(s[1:3]))), 3
	case b == 0xdb || b == 0xc6: // str32, bin32
		if len(s) < 5 {
			return nil, "", errPacked
		}
		n, head = int(binary.BigEndian.Uint32([]byte(s[1:5]))), 5
	case b >= 0x90 && b <= 0x9f, b == 0xdc, b == 0xdd: // arrays
		switch b {
		case 0xdc:
			if len(s) < 3 {
				return nil, "", errPacked
			}
			n, head = int(binary.BigEndian.Uint16([]byte(s[1:3]))), 3
		case 0xdd:
			if len(s) < 5 {
				return nil, "", errPacked
			}
			n, head = int(binary.BigEndian.Uint32([]byte(s[1:5]))), 5
		default:
			n = int(b & 0x0f)
		}
		rest := s[head:]
		if n > len(rest) { // every element takes a byte at least
			return nil, "", errPacked
		}
		arr := make([]any, n)
		for i := range arr {
			var err error
			if arr[i], rest, err = unpackValue(rest, depth+1); err != nil {
				return nil, "", err
			}
		}
		return arr, rest, nil
	case b == 0x80: // an empty table packed as a map
		return []any{}, s[1:], nil
	default:
		return nil, "", fmt.Errorf("%w: type byte %#x", errPacked, b)
	}
	if len(s) < head+n {
		return nil, "", errPacked
	}
	return s[head : head+n], s[head+n:], nil
}
