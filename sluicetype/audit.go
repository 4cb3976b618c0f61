package sluicetype

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Surface names where an operator action came from.
type Surface string

const (
	SurfaceConsole Surface = "console"
	SurfaceCLI     Surface = "cli"
	SurfaceAPI     Surface = "api"
	SurfaceSSH     Surface = "ssh"
	// SurfaceEmbedded is a program calling the engine itself.
	SurfaceEmbedded Surface = "embedded"
)

// AuditRecord is one mutating operator action as the audit trail keeps
// it: who, what, when and how it ended. Records are append-only: no route
// changes or removes one; only the audit retention sweep deletes the
// oldest.
type AuditRecord struct {
	// ID is the store's name for the record: newer records list first,
	// and a page continues past the last one's ID.
	ID string    `json:"id"`
	At time.Time `json:"at"`
	// Who: the actor as the timeline names it, its role, the surface it
	// acted through and its source (a remote address, an SSH key's
	// fingerprint).
	Actor   string  `json:"actor"`
	Role    Role    `json:"role,omitempty"`
	Surface Surface `json:"surface,omitempty"`
	Source  string  `json:"source,omitempty"`
	// What: the action (ActionInfo's names: retry, bulk, pause, ...),
	// the job, or the jobs of an action given several (Apply, a batch
	// enqueue), the other target it names (a queue, a fingerprint, a
	// schedule, an error group, a limit), the operation, a bulk action's
	// applied action and selector, how many jobs it counted, and an
	// edit's changed paths (never the values).
	Action    string   `json:"action"`
	JobID     string   `json:"job_id,omitempty"`
	IDs       []string `json:"ids,omitempty"`
	Target    string   `json:"target,omitempty"`
	Operation string   `json:"operation_id,omitempty"`
	Applied   Action   `json:"applied,omitempty"`
	Selector  string   `json:"selector,omitempty"`
	// PlanCutoff is a bulk run's plan's cutoff: with Applied and
	// Selector, the plan its preview showed (only jobs in their state by
	// then are taken); StartAt a scheduled run's start.
	PlanCutoff *time.Time `json:"plan_cutoff,omitempty"`
	StartAt    *time.Time `json:"start_at,omitempty"`
	Count      int64      `json:"count,omitempty"`
	Paths      []string   `json:"paths,omitempty"`
	// Result is "ok" for an action its store committed, else the reason
	// it was refused or failed (ReasonCode: wrong_state, conflict,
	// forbidden, ...), with Detail the error's text.
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
}

// AuditOK is the Result of a committed action.
const AuditOK = "ok"

// AuditQuery selects audit records: every set field must match (Since
// inclusive, Until exclusive; JobID the record's job or one of its IDs). After continues a page past that record's
// ID, towards older ones.
type AuditQuery struct {
	Actor     string    `json:"actor,omitempty"`
	Action    string    `json:"action,omitempty"`
	JobID     string    `json:"job_id,omitempty"`
	Operation string    `json:"operation_id,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	Until     time.Time `json:"until,omitzero"`
	After     string    `json:"after,omitempty"`
	Limit     int       `json:"limit,omitempty"`
}

// Matches reports whether r is selected by q's fields (After and Limit
// aside): the reference every store's AuditList answers as if it applied.
func (q AuditQuery) Matches(r *AuditRecord) bool {
	return (q.Actor == "" || r.Actor == q.Actor) &&
		(q.Action == "" || r.Action == q.Action) &&
		(q.JobID == "" || r.JobID == q.JobID || slices.Contains(r.IDs, q.JobID)) &&
		(q.Operation == "" || r.Operation == q.Operation) &&
		(q.Since.IsZero() || !r.At.Before(q.Since)) &&
		(q.Until.IsZero() || r.At.Before(q.Until))
}

// AuditPage is one page of audit records, newest first; Next continues
// it ("" at the end).
type AuditPage struct {
	Records []*AuditRecord `json:"records"`
	Next    string         `json:"next,omitempty"`
}

// DefaultAuditRetention is how long the audit trail keeps a record unless
// configured otherwise.
const DefaultAuditRetention = 90 * 24 * time.Hour

// ParseAuditQuery reads an audit query as the command line and the
// console write it: space-separated key:value terms, actor:, action:,
// job:, operation: (or op:), since: and until:, each once. A time is
// RFC 3339 or a duration before now ("2h": two hours ago).
func ParseAuditQuery(s string, now time.Time) (AuditQuery, error) {
	var q AuditQuery
	seen := map[string]bool{}
	for _, term := range strings.Fields(s) {
		k, v, ok := strings.Cut(term, ":")
		if !ok || v == "" {
			return q, fmt.Errorf("%w: audit query term %q: want key:value (actor, action, job, operation, since, until)", ErrInvalid, term)
		}
		if k == "op" {
			k = "operation"
		}
		if seen[k] {
			return q, fmt.Errorf("%w: audit query: %s given twice", ErrInvalid, k)
		}
		seen[k] = true
		switch k {
		case "actor":
			q.Actor = v
		case "action":
			q.Action = v
		case "job":
			q.JobID = v
		case "operation":
			q.Operation = v
		case "since", "until":
			t, err := auditTime(v, now)
			if err != nil {
				return q, fmt.Errorf("%w: audit query %s:%s: want an RFC 3339 time or a duration before now (2h, 30m)", ErrInvalid, k, v)
			}
			if k == "since" {
				q.Since = t
			} else {
				q.Until = t
			}
		default:
			return q, fmt.Errorf("%w: audit query: unknown key %q (actor, action, job, operation, since, until)", ErrInvalid, k)
		}
	}
	return q, nil
}

func auditTime(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

// String writes q's selecting fields as ParseAuditQuery reads them.
func (q AuditQuery) String() string {
	var parts []string
	for _, kv := range [][2]string{{"actor", q.Actor}, {"action", q.Action}, {"job", q.JobID}, {"operation", q.Operation}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+":"+kv[1])
		}
	}
	if !q.Since.IsZero() {
		parts = append(parts, "since:"+q.Since.UTC().Format(time.RFC3339))
	}
	if !q.Until.IsZero() {
		parts = append(parts, "until:"+q.Until.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, " ")
}
