//go:build race

package tui

// raceDetector: the test binary runs under the race detector, which
// slows the model down tenfold; exhaustive tests go less deep.
const raceDetector = true
