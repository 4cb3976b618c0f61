// Package backend is the store contract: the interfaces a store
// implements (Store and the ControlStore, WaitStore, IdempotencyStore and
// ArchiveStore it may add), their Noun+Verb params, the plans and writes
// the engine resolves for a store to apply, the transition table and the
// action specs derived from it, and the capabilities a store declares.
//
// The engine resolves; a store translates. Nothing in this package decides
// a job's fate on a store's behalf: a store reads a plan and writes it as
// one transaction. Stores (backend/sqlite, backend/postgres,
// backend/redis) import this package and sluicetype, never engine; all run
// the conformance suite in backend/backendtest.
//
// Stability: this package is for store authors. It follows the engine's
// releases, and may change in a minor release when the engine needs a new
// write from its stores; such changes are listed in CHANGELOG.md under the
// store contract. Programs that only run Sluice do not import it.
package backend
