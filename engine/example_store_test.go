package engine_test

import (
	"context"
	"log"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/backend/sqlite"
)

// exampleStore opens a SQLite store in a new temporary directory, as
// ExampleEngine_Enqueue does in full; the returned func closes it and
// removes the directory.
func exampleStore(ctx context.Context) (*sqlite.Store, func()) {
	dir, err := os.MkdirTemp("", "sluice-example-")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(dir, "jobs.db"), sqlite.Options{})
	if err != nil {
		os.RemoveAll(dir)
		log.Fatal(err)
	}
	return store, func() {
		store.Close()
		os.RemoveAll(dir)
	}
}
