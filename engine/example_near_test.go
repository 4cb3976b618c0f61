package engine_test

import (
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// One outage, split by an id the normaliser did not recognise: a group of
// 40 and two groups of one that differ from it in one word. A retry of
// the big group's Selector would leave the two behind; NearSingletons
// names them.
func ExampleNearSingletons() {
	groups := []engine.ErrorGroup{
		{Queue: "billing", Kind: "invoice.generate", Pattern: "partner refused batch <n>", Count: 40},
		{Queue: "billing", Kind: "invoice.generate", Pattern: "partner refused batch kxqzmw", Count: 1},
		{Queue: "billing", Kind: "invoice.generate", Pattern: "partner refused batch pltrvq", Count: 1},
		{Queue: "billing", Kind: "invoice.generate", Pattern: "currency service down", Count: 3},
		{Queue: "email", Kind: "receipt.send", Pattern: "partner refused batch zzkwbn", Count: 1},
	}
	for i, near := range engine.NearSingletons(groups) {
		fmt.Printf("%-30s %v\n", groups[i].Pattern, near)
	}
	// Output:
	// partner refused batch <n>      [1 2]
	// partner refused batch kxqzmw   [2]
	// partner refused batch pltrvq   [1]
	// currency service down          []
	// partner refused batch zzkwbn   []
}
