// Command sluice runs the Sluice job engine: the demo, the demo's workers,
// the operations console (embedded, attached to an API, or over SSH), the
// HTTP control API, the operator commands (jobs, bulk, operations,
// quarantine, queues, archive), migrations and a quick benchmark. See
// `sluice --help`.
package main

import (
	"os"

	"github.com/sluicehq/sluice/cli"
)

func main() { os.Exit(cli.Execute()) }
