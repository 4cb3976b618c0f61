// Package sluicetype holds the value types that the engine and the stores
// share: a job and its state, events and attempt errors, the filter and
// its query language, cursors, workflow checkpoints, and the errors every
// layer matches with errors.Is and errors.As.
//
// Programs normally reach these through package engine, which names each
// of them again (engine.Job is Job). The package imports no
// other Sluice package, so a store, the engine, the control API and the
// console can all depend on it.
//
// Stability: these types are part of Sluice's public API and change only
// as engine's do.
package sluicetype
