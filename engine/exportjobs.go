package engine

import (
	"context"
	"errors"
	"fmt"
)

// ExportJobsParams selects the jobs ExportJobs hands on.
type ExportJobsParams struct {
	Filter Filter
	// WithPayload fills each job's payload. Listed jobs carry none, so
	// each costs one more read (GetJob); a caller that may not read
	// payloads is refused by ctl as GetJob refuses it.
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
	cursor := ""
	for {
		page, err := ctl.ListJobs(ctx, ListJobsParams{Filter: p.Filter, Cursor: cursor, Limit: MaxListLimit})
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		for _, j := range page.Jobs {
			if p.WithPayload {
				d, err := ctl.GetJob(ctx, j.ID, true)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					return fmt.Errorf("export: job %s: %w", j.ID, err)
				}
				j.Payload = d.Job.Payload
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
