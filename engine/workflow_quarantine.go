package engine

import "fmt"

// Crashes per (fingerprint, step) for the quarantine screen: each crash
// inside a step names the step in its fingerprint write, and the store
// keeps the count in the crash's own transaction; FingerprintList and
// FingerprintGet return the counts with the record.
//
// Releasing a fingerprint keeps its counts, as it keeps the record's own
// crash count: they are the history of that payload, and a count that
// still grows after a release (the fix did not take) is what the operator
// needs to see on the next quarantine.

// crashedStep names the step a crash's checkpoint charges: the last
// step recorded as crashed (a crashed step is the last one the run
// reached), "" when the crash was outside any step.
func crashedStep(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	cp, err := ParseCheckpoint(raw)
	if err != nil {
		return ""
	}
	for i := len(cp.Steps) - 1; i >= 0; i-- {
		if cp.Steps[i].State != StepCrashed {
			continue
		}
		if cp.Steps[i].Name != "" {
			return cp.Steps[i].Name
		}
		return fmt.Sprintf("#%d", i+1)
	}
	return ""
}
