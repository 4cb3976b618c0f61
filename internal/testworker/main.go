// Command testworker is sluice with the chaos kinds (internal/chaos) built
// into `worker`, among them chaos.exit, which kills its own process. The
// process fault tests and the chaos harness (cli/fault_test.go,
// cli/chaos_test.go, scripts/chaos) build it and run
//
//	testworker worker --store sqlite://FILE --queues chaos ...
//
// It is a test tool: the sluice binary never carries these kinds.
package main

import (
	"os"

	"github.com/sluicehq/sluice/cli"
	"github.com/sluicehq/sluice/internal/chaos"
)

func main() {
	os.Exit(cli.ExecuteWithKinds(chaos.Register))
}
