package tui

import (
	"context"
	"fmt"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/termtext"
)

// Unique keys in the console: before a retry is confirmed, whether a live
// job holds the retried job's key — the store would refuse the retry. A
// bulk retry's preview has the store's own count (BulkResult.UniqueHeld).

// uniqueMarkCap is how many marked jobs a marked retry's confirmation
// looks up: one read of their keys, then one per keyed job, while the
// operator reads the dialog. Past it the note says how many it checked;
// the run's per-id results still name every holder.
const uniqueMarkCap = 20

// uniqueHolderMsg answers uniqueHolderCmd and uniqueMarkedCmd: the note
// a retry's confirmation gains ("" for none: no live job holds a key).
type uniqueHolderMsg struct {
	dlg  *confirmDialog
	note string
}

// uniqueHolderCmd looks for the live job holding key (uniqueHolder).
func (m *Model) uniqueHolderCmd(d *confirmDialog, id, key string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		// On an error the retry's answer will say.
		holder, _ := uniqueHolder(c, ctl, id, key)
		if holder == "" {
			return uniqueHolderMsg{dlg: d}
		}
		return uniqueHolderMsg{dlg: d, note: "live job " + termtext.Line(holder) + " holds this job's unique key: the retry will be refused"}
	}
}

// uniqueMarkedCmd counts, of the first uniqueMarkCap marked jobs, those
// whose unique key a live job holds, for a marked retry's confirmation.
func (m *Model) uniqueMarkedCmd(d *confirmDialog, ids []string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	total := len(ids)
	ids = ids[:min(len(ids), uniqueMarkCap)]
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		// On an error the retry's per-id results will say.
		page, err := ctl.ListJobs(c, engine.ListJobsParams{Filter: engine.Filter{IDs: ids, IncludeSuperseded: true}, Limit: len(ids)})
		if err != nil {
			return uniqueHolderMsg{dlg: d}
		}
		byID := make(map[string]*engine.Job, len(page.Jobs))
		for _, j := range page.Jobs {
			byID[j.ID] = j
		}
		held := 0
		var first, holder string
		for _, id := range ids {
			j := byID[id]
			if j == nil || j.UniqueKey == "" {
				continue
			}
			if h, err := uniqueHolder(c, ctl, j.ID, j.UniqueKey); err == nil && h != "" {
				held++
				if first == "" {
					first, holder = j.ID, h
				}
			}
		}
		if held == 0 {
			return uniqueHolderMsg{dlg: d}
		}
		of := fmt.Sprintf("%d of %d marked", held, total)
		if len(ids) < total {
			of = fmt.Sprintf("%d of the first %d of %d marked", held, len(ids), total)
		}
		return uniqueHolderMsg{dlg: d, note: fmt.Sprintf("%s are held by a live job, e.g. %s by %s; those retries will be refused",
			of, termtext.Line(first), termtext.Line(holder))}
	}
}

// uniqueHolder is a job other than id that holds key in a state every
// unique job holds its key in (engine.RequiredUniqueStates), or "".
func uniqueHolder(ctx context.Context, ctl engine.Control, id, key string) (string, error) {
	page, err := ctl.ListJobs(ctx, engine.ListJobsParams{Filter: engine.Filter{UniqueKey: key,
		States: engine.RequiredUniqueStates}, Limit: 2})
	if err != nil {
		return "", err
	}
	for _, j := range page.Jobs {
		if j.ID != id {
			return j.ID, nil
		}
	}
	return "", nil
}
