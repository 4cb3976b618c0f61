package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/internal/outage"
)

// completer writes successful outcomes in batches: whatever has piled up
// while the last batch was being written goes in the next transaction, so
// under load one commit covers many jobs and when idle a job is written at
// once. Config.CompleteWriters writers take batches from one channel, so
// with more than one a batch fills while another is in flight.
type completer struct {
	e       *Engine
	ch      chan completion
	closing chan struct{}
	once    sync.Once
	writers sync.WaitGroup
	done    chan struct{}
}

type completion struct {
	r    *runState
	item backend.JobCompleteItem
}

func newCompleter(e *Engine) *completer {
	return &completer{
		e:       e,
		ch:      make(chan completion, 4*e.cfg.CompleteBatch),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (c *completer) add(r *runState, del bool) {
	c.ch <- completion{r: r, item: backend.JobCompleteItem{JobRef: r.ref, Delete: del}}
}

// close writes what is queued and stops the completer. Every handler has
// returned by then, so nothing is added after.
func (c *completer) close() {
	c.once.Do(func() { close(c.closing) })
	<-c.done
}

// run starts the writers and returns when all have stopped.
func (c *completer) run() {
	defer close(c.done)
	for range c.e.cfg.CompleteWriters {
		c.writers.Go(c.write)
	}
	c.writers.Wait()
}

// write is one writer: a batch at a time until the completer closes, then
// what is left in the channel.
func (c *completer) write() {
	batch := make([]completion, 0, c.e.cfg.CompleteBatch)
	for {
		var first completion
		select {
		case first = <-c.ch:
		case <-c.closing:
			// Drain what is left, then stop.
			for {
				select {
				case cm := <-c.ch:
					batch = append(batch, cm)
					if len(batch) == c.e.cfg.CompleteBatch {
						c.flush(batch)
						batch = batch[:0]
					}
				default:
					if len(batch) > 0 {
						c.flush(batch)
					}
					return
				}
			}
		}
		batch = append(batch[:0], first)
		c.fill(&batch)
		c.flush(batch)
		batch = batch[:0]
	}
}

// completeGiveUp is the backoff past which a completer shut down stops
// retrying (half the completion backoff's cap of 2s, the least its jitter
// gives once the cap is reached).
const completeGiveUp = time.Second

// completeLinger bounds how long the completer waits for more successes
// before writing a small batch: a commit per handful of jobs is what caps
// a single-writer store.
const completeLinger = time.Millisecond

// fill adds what is queued to batch; when that leaves it small, it waits
// up to completeLinger for more.
func (c *completer) fill(batch *[]completion) {
	max := c.e.cfg.CompleteBatch
	for len(*batch) < max {
		select {
		case cm := <-c.ch:
			*batch = append(*batch, cm)
			continue
		default:
		}
		break
	}
	if len(*batch) >= max/8 {
		return
	}
	t := time.NewTimer(completeLinger)
	defer t.Stop()
	for len(*batch) < max {
		select {
		case cm := <-c.ch:
			*batch = append(*batch, cm)
		case <-t.C:
			return
		case <-c.closing:
			return
		}
	}
}

// flush writes one batch, retrying while the store is down. Leases keep
// being renewed meanwhile, since the jobs stay in the running set until
// their write is done.
func (c *completer) flush(batch []completion) {
	e := c.e
	items := make([]backend.JobCompleteItem, len(batch))
	for i, cm := range batch {
		items[i] = cm.item
	}
	ctx := context.WithoutCancel(e.hardCtx)
	for {
		res, err := e.store.JobCompleteMany(ctx, &backend.JobCompleteManyParams{Items: items, EndProbation: true})
		if err == nil {
			e.outComplete.Succeed()
			for i, cm := range batch {
				if res[i] != nil {
					if errors.Is(res[i], ErrLeaseLost) {
						e.log.Info("completion refused: lease lost", "job", cm.item.ID)
					} else {
						e.log.Error("completion failed", "job", cm.item.ID, "err", res[i])
					}
				}
				e.running.remove(cm.item.ID)
			}
			e.publish(Change{Kind: ChangeJob, State: StateCompleted})
			e.observeCompleted(batch, res)
			// The jobs left running in the store only now: a producer
			// a limit cut short waits for this to claim again.
			// A signal is a non-blocking send to a channel of one: a
			// queue signalled twice wakes once.
			for _, cm := range batch {
				if q := e.queues[cm.r.queue]; q != nil {
					signal(q.landedCh)
				}
			}
			for i, cm := range batch {
				if res[i] == nil {
					e.childEnded(cm.item.ID)
				}
			}
			return
		}
		e.contact.fail()
		if !outage.StoreUnavailable(err) {
			e.log.Warn("completions not written; retrying", "jobs", len(items), "err", err)
		}
		wait := e.outComplete.Fail(err, "jobs", len(items))
		if e.hardCtx.Err() != nil && wait >= completeGiveUp {
			// Shut down and the store still refuses after the backoff
			// has grown near its cap: leave the jobs to the reaper,
			// which hands them out again.
			return
		}
		// Not bound by a context: the jobs stay leased (renewed) until
		// written, and a shutdown gives up above instead.
		time.Sleep(wait)
	}
}
