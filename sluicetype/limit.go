package sluicetype

import "time"

// LimitScope names what a concurrency limit counts.
type LimitScope string

const (
	// LimitKind counts the running jobs of one kind, in every queue.
	LimitKind LimitScope = "kind"
	// LimitQueue counts the running jobs of one queue, of every kind.
	LimitQueue LimitScope = "queue"
)

// Valid reports whether s is a scope the stores know.
func (s LimitScope) Valid() bool { return s == LimitKind || s == LimitQueue }

// Limit is a concurrency limit that holds across every process sharing a
// store: at most Concurrency jobs of the kind or queue Name run at once.
// With Key (kind limits only), a top-level field of the payload, the
// limit is partitioned: at most Concurrency run at once per value of it
// (per customer, per tenant); a job without the field is in the
// partition of "". Running is how many ran when the limit was read, all
// partitions together (listings only).
type Limit struct {
	Scope       LimitScope `json:"scope"`
	Name        string     `json:"name"`
	Concurrency int        `json:"concurrency"`
	Key         string     `json:"key,omitempty"`
	// Rate, when above 0, is at most Rate starts (claims) of the kind or
	// queue in any RateWindow (a second when 0), across processes.
	Rate       int           `json:"rate,omitempty"`
	RateWindow time.Duration `json:"rate_window,omitempty"`
	Running    int64         `json:"running"`
	Starts     int64         `json:"starts,omitempty"`
	UpdatedAt  time.Time     `json:"updated_at"`
	UpdatedBy  string        `json:"updated_by,omitempty"`
}

// String is how the console and the CLI name a limit: "kind billing.charge",
// "kind billing.charge per customer".
func (l Limit) String() string {
	if l.Key != "" {
		return string(l.Scope) + " " + l.Name + " per " + l.Key
	}
	return string(l.Scope) + " " + l.Name
}

// ValidLimitKey reports whether key can partition a limit: letters,
// digits, '_' and '-', at most 64 — a top-level payload field the stores
// can name in their queries as a literal.
func ValidLimitKey(key string) bool {
	if len(key) == 0 || len(key) > 64 {
		return false
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Window is the rate's window: RateWindow, a second when 0.
func (l Limit) Window() time.Duration {
	if l.RateWindow <= 0 {
		return time.Second
	}
	return l.RateWindow
}
