package redis

import (
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/sluicetype"
)

// SetBatchBudget sets the server time after which a bulk batch script
// stops early (batchScriptBudget); a negative budget stops it at its
// first look at the clock.
func SetBatchBudget(s *Store, d time.Duration) { s.batchBudget = d }

// Client is the store's Redis client, for tests that read or break its
// keys directly; the store keeps it out of its public API.
func Client(s *Store) goredis.UniversalClient { return s.c }

// Key is the full name of a key of the store's namespace (Store.key).
func Key(s *Store, parts ...string) string { return s.key(parts...) }

// JobFieldDefaults is the job hash's field table (jobFields): every
// field's name in the hash, mapped to the value it reads as when missing
// ("" for none).
func JobFieldDefaults() map[string]string {
	m := map[string]string{}
	for _, f := range jobFields() {
		m[f.name] = f.def
	}
	return m
}

// InsertedFields is the hash JobInsertMany takes luaInsert to have written
// for jp (payload aside), given the state, scheduled_at and now it read.
func InsertedFields(jp *backend.JobInsertParams, state, sched, now string) map[string]string {
	r := insertRec(jp)
	return insertedFields(&r, state, sched, now)
}

// DecodeJobHash decodes a job hash as the store reads it.
func DecodeJobHash(m map[string]string) (*sluicetype.Job, error) { return jobFrom(m, nil) }

// Job hash field names the tests write to directly.
const (
	FieldAttempt     = fAttempt
	FieldFence       = fFence
	FieldScheduledAt = fScheduledAt
	FieldDeadline    = fDeadline
	FieldTimeout     = fTimeout
	FieldTags        = fTags
	FieldPayload     = fPayload
	FieldState       = fState
	FieldCreatedAt   = fCreatedAt
	OpFieldMatched   = oMatched
)
