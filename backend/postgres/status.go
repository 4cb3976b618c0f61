package postgres

import "context"

// MigrationStatus is where a schema stands against this build's
// migrations.
type MigrationStatus struct {
	// Version is the newest migration applied; 0 for an empty or missing
	// schema.
	Version int
	// Latest is SchemaVersion.
	Latest int
	// Pending names the migrations the schema lacks, oldest first.
	Pending []string
}

// Status reads the schema's applied migrations without changing anything.
func (s *Store) Status(ctx context.Context) (*MigrationStatus, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	st := &MigrationStatus{Latest: ms[len(ms)-1].version}
	have, err := s.applied(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	for v := range have {
		st.Version = max(st.Version, v)
	}
	for _, m := range ms {
		if !have[m.version] {
			st.Pending = append(st.Pending, m.name)
		}
	}
	return st, nil
}
