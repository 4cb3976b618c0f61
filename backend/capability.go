package backend

import "slices"

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
)

// Declares reports whether s declares c.
func Declares(s Store, c Capability) bool {
	return slices.Contains(s.Capabilities(), c)
}
