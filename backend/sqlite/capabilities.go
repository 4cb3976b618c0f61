package sqlite

import (
	"github.com/sluicehq/sluice/backend"
)

var _ backend.Store = (*Store)(nil)

// Capabilities: SQLite serves every filter field, error groups, bulk
// operations, maintained counts, queue pausing and idempotency keys
// committed with the mutation.
func (s *Store) Capabilities() []backend.Capability {
	return []backend.Capability{
		backend.CapabilityFilterPayload, backend.CapabilityFilterMeta, backend.CapabilityFilterTags,
		backend.CapabilityFilterError, backend.CapabilityErrorGroups, backend.CapabilityOperations,
		backend.CapabilityCounts, backend.CapabilityQueuePause, backend.CapabilityIdempotency,
	}
}
