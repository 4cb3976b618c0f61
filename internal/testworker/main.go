// Command testworker is sluice with the chaos kinds (internal/chaos) built
// into `worker`, among them chaos.exit, which kills its own process. The
// process fault tests and the chaos harness (cli/fault_test.go,
// cli/chaos_test.go, scripts/chaos) build it and run
//
//	testworker worker --store sqlite://FILE --queues chaos ...
//	testworker chaos --store URL --duration D --seed S ...   (the harness)
//	testworker unique-enqueue --store URL --at T ...   (goroutines racing for unique keys)
//	testworker periodic --store URL --schedules N --side FILE ... (schedules)
//	testworker limited --store URL --queue Q --side FILE ...   (kinds under limits)
//
// `worker` is sluice's own worker command, unless --record FILE,
// --defeat-fencing, --fault or --count-redis is given: then it is this binary's worker (worker.go),
// which takes the same flags, wraps its store in the chaos witness (each
// claim, completion and finish recorded in the side table FILE, with
// whether the store accepted it) and, with --defeat-fencing, defeats
// fencing on purpose, to prove that the harness's checker catches it.
// `chaos` runs the harness (internal/chaos.Run), whose workers are this
// same binary.
//
// It is a test tool: the sluice binary never carries these kinds.
package main

import (
	"os"
	"strings"

	"github.com/sluicehq/sluice/cli"
	"github.com/sluicehq/sluice/internal/chaos"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "chaos":
			os.Exit(chaos.Main(args[1:], os.Stdout, os.Stderr))
		case "unique-enqueue":
			os.Exit(runUniqueEnqueue(args[1:], os.Stdout, os.Stderr))
		case "periodic":
			os.Exit(runPeriodic(args[1:]))
		case "limited":
			os.Exit(runLimited(args[1:]))
		case "worker":
			if witnessed(args[1:]) {
				os.Exit(runWorker(args[1:]))
			}
		}
	}
	os.Exit(cli.ExecuteWithKinds(chaos.Register))
}

// witnessed reports whether a worker command line asks for the witness.
func witnessed(args []string) bool {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "record" || name == "defeat-fencing" || name == "fault" || name == "count-redis") {
			return true
		}
	}
	return false
}
