package backend

import (
	"context"
	"slices"
)

// Capability names something a store can do beyond the rules every store
// keeps. A store declares its capabilities through Store.Capabilities;
// code asks for one with Declares and never guesses from the store's type.
// A method behind a capability the store does not declare answers
// ErrUnsupported.
type Capability string

const (
	// CapabilityFilterPayload: JobListPage, JobCountMatching and bulk selectors serve
	// payload.<path> conditions.
	CapabilityFilterPayload Capability = "filter.payload"
	// CapabilityFilterMeta: the same for meta.<key> conditions.
	CapabilityFilterMeta Capability = "filter.meta"
	// CapabilityFilterTags: the same for tag conditions.
	CapabilityFilterTags Capability = "filter.tags"
	// CapabilityFilterError: the same for text in the last error.
	CapabilityFilterError Capability = "filter.error"
	// CapabilityErrorGroups: JobErrorGroups.
	CapabilityErrorGroups Capability = "error_groups"
	// CapabilityOperations: persisted bulk operations (Operation*).
	CapabilityOperations Capability = "operations"
	// CapabilityCounts: maintained per-queue counters (JobCountByQueue).
	CapabilityCounts Capability = "counts"
	// CapabilityQueuePause: QueuePause and QueueResume.
	CapabilityQueuePause Capability = "queues.pause"
	// CapabilityIdempotency: the store keeps idempotency keys, committed
	// in the same transaction as the mutation (IdempotencyStore).
	CapabilityIdempotency Capability = "idempotency"
	// CapabilityArchive: a cold archive of evicted jobs (ArchiveStore).
	CapabilityArchive Capability = "archive"
	// CapabilityWakeups: the store tells every process when a queue got
	// work (Notifier), so idle runners wake at once and Subscribe hears
	// other processes.
	CapabilityWakeups Capability = "wakeups"
	// CapabilityDurabilityWarnings: the store reads its server's
	// configuration and says what about it loses jobs silently
	// (DurabilityWarner).
	CapabilityDurabilityWarnings Capability = "durability.warnings"
	// CapabilityUnique: the store holds JobInsertParams.UniqueKey
	// atomically while its job is in a state of its UniqueStates, and
	// refuses a write that would make a second holder with a
	// *sluicetype.UniqueHeldError. The engine refuses a unique enqueue on a
	// store without it.
	CapabilityUnique Capability = "unique"
	// CapabilitySchedules: the store keeps periodic jobs' schedules
	// (ScheduleStore).
	CapabilitySchedules Capability = "schedules"
	// CapabilityLimits: the store keeps limits across processes and holds
	// them where it claims (LimitStore).
	CapabilityLimits Capability = "limits"
	// CapabilityAudit: the store keeps the audit trail, each record
	// appended in its action's transaction (AuditStore).
	CapabilityAudit Capability = "audit"
)

// Declares reports whether s declares c.
func Declares(s Store, c Capability) bool {
	return slices.Contains(s.Capabilities(), c)
}

// The optional interfaces, each behind its capability. Code reaches one
// through its accessor, never by asserting the store's type: a store
// that implements an interface without declaring its capability (a
// wrapper, a store whose server lacks the feature) is not asked.

// NotifierOf returns s's wakeup stream when s declares CapabilityWakeups.
func NotifierOf(s Store) (Notifier, bool) {
	n, ok := s.(Notifier)
	return n, ok && Declares(s, CapabilityWakeups)
}

// DurabilityWarnerOf returns s's durability check when s declares
// CapabilityDurabilityWarnings.
func DurabilityWarnerOf(s Store) (DurabilityWarner, bool) {
	w, ok := s.(DurabilityWarner)
	return w, ok && Declares(s, CapabilityDurabilityWarnings)
}

// DurabilityWarner is what a store declaring CapabilityDurabilityWarnings
// offers. Each warning is one sentence for an operator. A store that
// cannot read its configuration returns none.
type DurabilityWarner interface {
	DurabilityWarnings(ctx context.Context) []string
}
