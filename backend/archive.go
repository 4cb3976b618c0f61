package backend

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/sluicetype"
)

// The cold archive: a store declaring CapabilityArchive keeps the
// terminal jobs its retention sweep evicted from the queues that opted in,
// for audit. Nothing redrives from it; it is read through ArchiveStore.

// ArchiveListParams pages the archive, newest eviction first.
type ArchiveListParams struct {
	Queue string // "" for all
	Kind  string // "" for all
	// After continues past the last row seen (its EvictedAt and ID).
	After *sluicetype.Cursor
	Limit int
}

// ArchiveStore is what a store declaring CapabilityArchive offers.
type ArchiveStore interface {
	// ArchiveList pages archived jobs, newest eviction first.
	ArchiveList(ctx context.Context, p *ArchiveListParams) ([]sluicetype.ArchivedJob, error)
	// ArchiveGet returns the archived copies of one job id (an id
	// re-used is archived again), newest first; ErrNotFound when none.
	ArchiveGet(ctx context.Context, id string) ([]sluicetype.ArchivedJob, error)
}

// ArchiveOf returns s's cold archive, or an error matching ErrUnsupported
// when s has none.
func ArchiveOf(s Store) (ArchiveStore, error) {
	a, ok := s.(ArchiveStore)
	if !ok || !Declares(s, CapabilityArchive) {
		return nil, fmt.Errorf("%w: this store (%s) has no cold archive", sluicetype.ErrUnsupported, s.Backend())
	}
	return a, nil
}
