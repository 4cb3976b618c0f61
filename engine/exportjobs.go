package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/backend"
)

// ExportJobsParams selects the jobs ExportJobs hands on.
type ExportJobsParams struct {
	Filter Filter
	// WithPayload fills each job's payload. Listed jobs carry none, so
	// each costs one more read: of the job alone on an *Engine, through
	// GetJob on any other Control (which refuses a caller that may not
	// read payloads, as GetJob does).
	WithPayload bool
}

// ExportJobs hands emit every job p.Filter matches, newest first by the
// time each entered its state, as ListJobs pages them. It holds one page
// at a time (MaxListLimit jobs), so an export of a million jobs costs the
// memory of one page; a job that changes state while the export runs may
// be met twice or not at all, as when paging by hand. A job deleted
// between its page and its payload's read is left out. An error from emit
// stops the export and is returned as it is.
func ExportJobs(ctx context.Context, ctl Control, p ExportJobsParams, emit func(*Job) error) error {
	if err := p.Filter.Validate(); err != nil {
		return err
	}
	payloadOf := func(id string) (json.RawMessage, error) {
		d, err := ctl.GetJob(ctx, id, true)
		if err != nil {
			return nil, err
		}
		return d.Job.Payload, nil
	}
	if e, ok := ctl.(*Engine); ok {
		// GetJob reads the timeline, the dead letter and the limits too:
		// four reads where the payload needs one.
		payloadOf = func(id string) (json.RawMessage, error) {
			j, err := e.store.JobGetByID(ctx, &backend.JobGetByIDParams{ID: id, IncludePayload: true})
			if err != nil {
				return nil, err
			}
			return j.Payload, nil
		}
	}
	cursor := ""
	for {
		page, err := ctl.ListJobs(ctx, ListJobsParams{Filter: p.Filter, Cursor: cursor, Limit: MaxListLimit})
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for _, j := range page.Jobs {
			if p.WithPayload {
				p, err := payloadOf(j.ID)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					return fmt.Errorf("export: job %s: %w", j.ID, err)
				}
				j.Payload = p
			}
			if err := emit(j); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		cursor = page.Next
	}
}
