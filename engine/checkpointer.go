package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/backend"
)

// checkpointer group-commits step checkpoints: a step's write joins the
// writes waiting while another group is being committed, and the next
// group goes to the store as one transaction. No write waits for a timer:
// a lone step commits at once, and under load each transaction carries
// every step that ended meanwhile.
type checkpointer struct {
	e *Engine

	mu      sync.Mutex
	pending []*checkpointWrite
	busy    bool
}

type checkpointWrite struct {
	item backend.JobCheckpointItem
	done chan error
}

// checkpointBatch is the most step writes in one transaction.
const checkpointBatch = 1000

// write records one step's checkpoint under ref and returns once it is
// committed or refused.
func (c *checkpointer) write(ctx context.Context, ref backend.JobRef, raw json.RawMessage) error {
	w := &checkpointWrite{item: backend.JobCheckpointItem{JobRef: ref, Checkpoint: raw}, done: make(chan error, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, w)
	lead := !c.busy
	c.busy = true
	c.mu.Unlock()
	if lead {
		// This caller commits groups until its own is committed, then
		// hands what waits to a goroutine of its own.
		c.flush(ctx, w)
	}
	return <-w.done
}

// flush commits groups until own's is committed (own nil: until none
// waits).
func (c *checkpointer) flush(ctx context.Context, own *checkpointWrite) {
	for {
		c.mu.Lock()
		batch := c.pending
		if len(batch) > checkpointBatch {
			batch = batch[:checkpointBatch]
			c.pending = append([]*checkpointWrite(nil), c.pending[checkpointBatch:]...)
		} else {
			c.pending = nil
		}
		if len(batch) == 0 {
			c.busy = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		items := make([]backend.JobCheckpointItem, len(batch))
		for i, w := range batch {
			items[i] = w.item
		}
		errs, err := c.e.store.JobCheckpoint(ctx, &backend.JobCheckpointParams{Items: items})
		if err == nil && len(errs) != len(batch) {
			err = fmt.Errorf("checkpoint: %d results for %d writes", len(errs), len(batch))
		}
		mine := false
		for i, w := range batch {
			mine = mine || w == own
			if err != nil {
				w.done <- err
			} else {
				w.done <- errs[i]
			}
		}
		if mine {
			go c.flush(ctx, nil)
			return
		}
	}
}
