package redis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/sluicetype"
)

// The field names of the hashes the scripts write, defined once: the Go
// side reads and writes them by these constants, and the scripts by
// their tables (F.state is the job hash's state field, 's'), which
// expandRefs fills in from the same constants when a script is built, so
// the two sides cannot drift apart by a typo or a field added on one
// side only.
//
// The names in the hashes stay short: a job hash holds some thirty of
// them, and a namespace millions of jobs.

// The job hash, {ns}:job:ID. Empty fields are not stored, nor the
// fields with a default (hashField.def) at their default.
const (
	fID             = "id"
	fQueue          = "q"
	fKind           = "k"
	fPayload        = "p"
	fSchemaVersion  = "sv"
	fMetadata       = "m"
	fTags           = "tg"
	fPriority       = "pr"
	fState          = "s"
	fAttempt        = "a"
	fMaxAttempts    = "ma"
	fCrashAttempt   = "c"
	fFingerprint    = "fp"
	fFence          = "f"
	fScheduledAt    = "sch"
	fDeadline       = "dl"
	fTimeout        = "to"
	fCreatedAt      = "cr"
	fAttemptedAt    = "ata"
	fAttemptedBy    = "atb"
	fStateChangedAt = "sca"
	fFinalizedAt    = "fin"
	fReason         = "rs"
	fLeaseID        = "lid"
	fLeaseWorker    = "lw"
	fLeaseExpires   = "lx"
	fVersion        = "v"
	fCheckpoint     = "cp"
	fDeadLetterOf   = "dlo"
	fRetryOf        = "ro"
	fSupersededBy   = "sb"
	fLastError      = "le"
	fPattern        = "ep"
	fErrorsKept     = "ne"
	// A unique job's key and the mask of the states that hold it
	// (sluicetype.UniqueStatesMask); the key's holder is {ns}:uq:KEY.
	fUniqueKey    = "uk"
	fUniqueStates = "us"
)

// hashField is one field of a hash the scripts write: lua is its key in
// the scripts' table of the hash (F.lua), name its name in the hash, def
// the value a missing field reads as ("" for none).
type hashField struct {
	lua, name, def string
}

// jobFields is the job hash's table, in the order the scripts' FIELDS
// list gives (load fills every one).
func jobFields() []hashField {
	return []hashField{
		{"id", fID, ""},
		{"queue", fQueue, ""},
		{"kind", fKind, ""},
		{"payload", fPayload, ""},
		{"schema_version", fSchemaVersion, ""},
		{"metadata", fMetadata, ""},
		{"tags", fTags, "[]"},
		{"priority", fPriority, "0"},
		{"state", fState, ""},
		{"attempt", fAttempt, "0"},
		{"max_attempts", fMaxAttempts, ""},
		{"crash_attempt", fCrashAttempt, "0"},
		{"fingerprint", fFingerprint, ""},
		{"fence", fFence, "0"},
		{"scheduled_at", fScheduledAt, ""},
		{"deadline", fDeadline, ""},
		{"timeout", fTimeout, "0"},
		{"created_at", fCreatedAt, ""},
		{"attempted_at", fAttemptedAt, ""},
		{"attempted_by", fAttemptedBy, ""},
		{"state_changed_at", fStateChangedAt, ""},
		{"finalized_at", fFinalizedAt, ""},
		{"reason", fReason, ""},
		{"lease_id", fLeaseID, ""},
		{"lease_worker", fLeaseWorker, ""},
		{"lease_expires", fLeaseExpires, ""},
		{"version", fVersion, ""},
		{"checkpoint", fCheckpoint, ""},
		{"dead_letter_of", fDeadLetterOf, ""},
		{"retry_of", fRetryOf, ""},
		{"superseded_by", fSupersededBy, ""},
		{"last_error", fLastError, ""},
		{"pattern", fPattern, ""},
		{"errors_kept", fErrorsKept, ""},
		{"unique_key", fUniqueKey, ""},
		{"unique_states", fUniqueStates, "0"},
	}
}

// The operation hash, {ns}:op:ID.
const (
	oID        = "id"
	oAction    = "act"
	oSelector  = "sel"
	oStatus    = "st"
	oCreatedBy = "by"
	oCreatedAt = "cr"
	oStartedAt = "sa"
	oFinished  = "fa"
	oMatched   = "mt"
	oProcessed = "pc"
	oSucceeded = "sc"
	oFailed    = "fl"
	oError     = "er"
	oRate      = "rt"
	oCursor    = "cur"
	oHolder    = "lh"
	oFence     = "lf"
	oExpires   = "lx"
	oFlushCost = "zp"
	// oStartAt is a scheduled operation's start time; "" (or absent, in
	// a hash written before it) starts at once.
	oStartAt = "sw"
	// oCanary is a canary run's state as JSON (backend.EncodeCanary), and
	// oCanaryRecent its window's ids joined by US, which a batch's script
	// appends to; both "" (or absent, in a hash written before them) for
	// a run without a canary.
	oCanary       = "cy"
	oCanaryRecent = "cyr"
)

func opFields() []hashField {
	return []hashField{
		{"id", oID, ""}, {"action", oAction, ""}, {"selector", oSelector, ""}, {"status", oStatus, ""},
		{"created_by", oCreatedBy, ""}, {"created_at", oCreatedAt, ""}, {"started_at", oStartedAt, ""},
		{"finished_at", oFinished, ""}, {"matched", oMatched, ""}, {"processed", oProcessed, ""},
		{"succeeded", oSucceeded, ""}, {"failed", oFailed, ""}, {"error", oError, ""}, {"rate", oRate, ""},
		{"cursor", oCursor, ""}, {"lease_holder", oHolder, ""}, {"lease_fence", oFence, ""},
		{"lease_expires", oExpires, ""}, {"flush_cost", oFlushCost, ""}, {"start_at", oStartAt, ""},
		{"canary", oCanary, ""}, {"canary_recent", oCanaryRecent, ""},
	}
}

// The quarantine record, {ns}:fpr:FP.
const (
	qFingerprint = "fp"
	qKind        = "kind"
	qStatus      = "st"
	qSince       = "since"
	qCrashes     = "cr"
	qLastError   = "le"
	qLastJob     = "lj"
)

func fprFields() []hashField {
	return []hashField{
		{"fingerprint", qFingerprint, ""}, {"kind", qKind, ""}, {"status", qStatus, ""}, {"since", qSince, ""},
		{"crashes", qCrashes, ""}, {"last_error", qLastError, ""}, {"last_job", qLastJob, ""},
	}
}

// The idempotency record, {ns}:idem:KEY.
const (
	iHash      = "h"
	iStatus    = "st"
	iToken     = "tok"
	iClaimExp  = "cx"
	iCreatedAt = "cr"
	iExpires   = "x"
	iResponse  = "resp"
)

func idemFields() []hashField {
	return []hashField{
		{"hash", iHash, ""}, {"status", iStatus, ""}, {"token", iToken, ""}, {"claim_expires", iClaimExp, ""},
		{"created_at", iCreatedAt, ""}, {"expires", iExpires, ""}, {"response", iResponse, ""},
	}
}

// The schedule of periodic jobs, {ns}:sch:NAME (periodic.go).
const (
	sSpec      = "sp"
	sZone      = "zn"
	sLastTick  = "lt"
	sLastJob   = "lj"
	sFiredAt   = "fa"
	sPaused    = "pz"
	sTrigger   = "tr"
	sSeenAt    = "se"
	sCreatedAt = "cr"
)

func scheduleFields() []hashField {
	return []hashField{
		{"spec", sSpec, ""}, {"zone", sZone, ""}, {"last_tick", sLastTick, ""}, {"last_job", sLastJob, ""},
		{"fired_at", sFiredAt, ""}, {"paused", sPaused, ""}, {"trigger", sTrigger, ""}, {"seen_at", sSeenAt, ""},
		{"created_at", sCreatedAt, ""},
	}
}

// The worker record, {ns}:w:ID, and the maintenance lease, {ns}:lead:NAME.
const (
	wStarted   = "st"
	wHost      = "host"
	wPID       = "pid"
	wQueues    = "qs"
	wHeartbeat = "hb"
	wExpires   = "x"
	lHolder    = "holder"
	lExpires   = "x"
)

func workerFields() []hashField {
	return []hashField{
		{"started", wStarted, ""}, {"host", wHost, ""}, {"pid", wPID, ""}, {"queues", wQueues, ""},
		{"heartbeat", wHeartbeat, ""}, {"expires", wExpires, ""},
	}
}

func leadFields() []hashField {
	return []hashField{{"holder", lHolder, ""}, {"expires", lExpires, ""}}
}

// luaPrelude is the Lua every script starts with: the job hash's FIELDS
// (every field, in table order) and DEF (the defaults).
func luaPrelude() string {
	var b strings.Builder
	b.WriteString("local FIELDS = {")
	for i, f := range jobFields() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + f.name + "'")
	}
	b.WriteString("}\nlocal DEF = {")
	n := 0
	for _, f := range jobFields() {
		if f.def == "" {
			continue
		}
		if n > 0 {
			b.WriteString(", ")
		}
		n++
		b.WriteString("['" + f.name + "'] = '" + f.def + "'")
	}
	// UBIT: each state's bit in a unique job's states mask.
	b.WriteString("}\nlocal UBIT = {")
	for i, st := range sluicetype.AllStates {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "['%s'] = %d", st, sluicetype.UniqueStateBit(st))
	}
	b.WriteString("}\n")
	return b.String()
}

// expandRefs replaces each reference T.key in a script's source, T one of
// the names of refs, with refs[T](key): a field's name in its hash as a
// Lua string, a record offset as a number. It runs when the script is
// built (script, at package init), so the compiled script reads
// constants, as cheap as literals, and is never slowed by a table lookup
// per field; a key the table lacks panics there, which every test of the
// package meets.
func expandRefs(src string, refs map[string]func(key string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		c := src[i]
		// A reference starts a name: not after a letter, digit, _ or dot.
		if i > 0 && (isIdent(src[i-1]) || src[i-1] == '.') || !isIdent(c) {
			b.WriteByte(c)
			i++
			continue
		}
		j := i
		for j < len(src) && isIdent(src[j]) {
			j++
		}
		name := src[i:j]
		ref, ok := refs[name]
		if !ok || j >= len(src) || src[j] != '.' {
			b.WriteString(name)
			i = j
			continue
		}
		k := j + 1
		for k < len(src) && isIdent(src[k]) {
			k++
		}
		v, ok := ref(src[j+1 : k])
		if !ok {
			panic(fmt.Sprintf("redis: script refers to %s, which its table lacks", src[i:k]))
		}
		b.WriteString(v)
		i = k
	}
	return b.String()
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// fieldRefs are the scripts' tables of hash field names: F the job hash,
// OF operations, QF quarantine records, IF idempotency records, WF
// workers, LF maintenance leases. F.state reads as 's'.
func fieldRefs() map[string]func(string) (string, bool) {
	refs := map[string]func(string) (string, bool){}
	for name, fs := range map[string][]hashField{"F": jobFields(), "OF": opFields(), "QF": fprFields(),
		"IF": idemFields(), "WF": workerFields(), "LF": leadFields(), "SF": scheduleFields()} {
		refs[name] = func(key string) (string, bool) {
			for _, f := range fs {
				if f.lua == key {
					return "'" + f.name + "'", true
				}
			}
			return "", false
		}
	}
	return refs
}

// The batch scripts (insert, complete, renew, checkpoint, delete
// expired) take a head of named values and then one record of values per
// item, each value at an offset that a Go constant names: the Go side
// fills a record by those constants, and batchScript hands the same
// offsets to the script by name (ARGV[i + R.queue]), so neither side
// counts positions by hand. A record stays a run of plain arguments
// rather than one encoded string: splitting one per job in Lua would cost
// the hot path.
type batchLayout struct {
	head, rec []string
}

// batchScript is a batch script: body reads the head's values by name
// from A, a record's offsets as R.name (numbers once built: expandRefs),
// R1 the first record's index in ARGV and RN a record's length.
func batchScript(l batchLayout, body string) *luaScript {
	var b strings.Builder
	b.WriteString("local A = {")
	for i, n := range l.head {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = ARGV[%d]", n, 4+i)
	}
	fmt.Fprintf(&b, "}\nlocal R1, RN = %d, %d\n", 4+len(l.head), len(l.rec))
	rec := func(key string) (string, bool) {
		for i, n := range l.rec {
			if n == key {
				return strconv.Itoa(i), true
			}
		}
		return "", false
	}
	return script(expandRefs(b.String()+body, map[string]func(string) (string, bool){"R": rec}))
}

// appendArgs appends a head's or a record's values to a script's
// arguments.
func appendArgs(a []any, vs ...string) []any {
	for _, v := range vs {
		a = append(a, v)
	}
	return a
}
