package sqlite

import "github.com/sluicehq/sluice/engine"

var _ engine.Store = (*Store)(nil)

// Capabilities: SQLite serves every filter field, error groups, bulk
// operations, maintained counts, queue pausing and idempotency keys
// committed with the mutation.
func (s *Store) Capabilities() []engine.Capability {
	return []engine.Capability{
		engine.CapabilityFilterPayload, engine.CapabilityFilterMeta, engine.CapabilityFilterTags,
		engine.CapabilityFilterError, engine.CapabilityErrorGroups, engine.CapabilityOperations,
		engine.CapabilityCounts, engine.CapabilityQueuePause, engine.CapabilityIdempotency,
	}
}
