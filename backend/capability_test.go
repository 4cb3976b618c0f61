package backend_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/backend/sqlite/sqlitetest"
	"github.com/sluicehq/sluice/sluicetype"
)

// undeclared offers the optional interfaces without declaring their
// capabilities, as a wrapper of a store may: it declares only what the
// contract requires of every store.
type undeclared struct{ backend.Store }

func (undeclared) Capabilities() []backend.Capability { return nil }

func (undeclared) Wakeups(context.Context) <-chan string       { return nil }
func (undeclared) DurabilityWarnings(context.Context) []string { return nil }
func (undeclared) ArchiveList(context.Context, *backend.ArchiveListParams) ([]sluicetype.ArchivedJob, error) {
	return nil, nil
}
func (undeclared) ArchiveGet(context.Context, string) ([]sluicetype.ArchivedJob, error) {
	return nil, nil
}
func (undeclared) LimitList(context.Context) ([]sluicetype.Limit, error)   { return nil, nil }
func (undeclared) LimitSet(context.Context, *backend.LimitSetParams) error { return nil }

// TestAccessorsAskTheCapability: an accessor answers an optional
// interface only when the store declares its capability, whatever methods
// its type has.
func TestAccessorsAskTheCapability(t *testing.T) {
	s := undeclared{sqlitetest.New(t)}
	if _, ok := backend.NotifierOf(s); ok {
		t.Error("NotifierOf answered a store that does not declare wakeups")
	}
	if _, ok := backend.DurabilityWarnerOf(s); ok {
		t.Error("DurabilityWarnerOf answered a store that does not declare durability warnings")
	}
	if _, err := backend.ArchiveOf(s); err == nil {
		t.Error("ArchiveOf answered a store that does not declare an archive")
	}
	if _, err := backend.LimitStoreOf(s); err == nil {
		t.Error("LimitStoreOf answered a store that does not declare limits")
	}
}
