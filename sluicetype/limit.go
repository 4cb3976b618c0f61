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
// Running is how many ran when the limit was read (listings only).
type Limit struct {
	Scope       LimitScope `json:"scope"`
	Name        string     `json:"name"`
	Concurrency int        `json:"concurrency"`
	Running     int64      `json:"running"`
	UpdatedAt   time.Time  `json:"updated_at"`
	UpdatedBy   string     `json:"updated_by,omitempty"`
}

// String is how the console and the CLI name a limit: "kind billing.charge".
func (l Limit) String() string { return string(l.Scope) + " " + l.Name }
