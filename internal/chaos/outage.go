package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/sluicehq/sluice/engine"
)

// KindOutage fails as a job whose downstream is down would, while its
// payload's Flag file exists, and succeeds once it is gone: a test across
// processes turns the outage on and off with one file (the canary fault
// test redrives jobs that died of it).
const KindOutage = "chaos.outage"

// OutageError is what KindOutage returns during the outage.
const OutageError = "dial tcp 10.0.0.7:5432: connect: connection refused"

// Outage is KindOutage's payload.
type Outage struct {
	Flag string `json:"flag"`
	N    int    `json:"n,omitempty"`
}

func outageKinds() []engine.Kind {
	return []engine.Kind{{Name: KindOutage, Handler: engine.TypedHandler(outage), Backoff: backoff}}
}

func outage(_ context.Context, _ *engine.Job, p Outage) error {
	_, err := os.Stat(p.Flag)
	switch {
	case err == nil:
		return errors.New(OutageError)
	case errors.Is(err, os.ErrNotExist):
		return nil
	}
	return fmt.Errorf("outage flag: %w", err)
}
