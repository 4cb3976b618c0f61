// Command sluice runs the Sluice job engine: the demo, workers, and (later)
// the console, the HTTP control API and the operator commands. See
// `sluice --help`.
package main

import (
	"os"

	"github.com/sluicehq/sluice/cli"
)

func main() { os.Exit(cli.Execute()) }
