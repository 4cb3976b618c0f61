package tui

import (
	"context"

	tea "charm.land/bubbletea/v2"

	"github.com/sluicehq/sluice/engine"
)

// Unique keys in the console: before a retry is confirmed, whether a live
// job holds the retried job's key — the store would refuse the retry.

// uniqueHolderMsg answers uniqueHolderCmd: the live job holding the
// unique key of the job a confirmation asks to retry ("" for none).
type uniqueHolderMsg struct {
	dlg    *confirmDialog
	holder string
}

// uniqueHolderCmd looks for the live job holding key (uniqueHolder).
func (m *Model) uniqueHolderCmd(d *confirmDialog, id, key string) tea.Cmd {
	ctl, ctx := m.ctl, m.ctx
	return func() tea.Msg {
		c, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		// On an error the retry's answer will say.
		holder, _ := uniqueHolder(c, ctl, id, key)
		return uniqueHolderMsg{dlg: d, holder: holder}
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
