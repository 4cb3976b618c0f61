// Package engine is the Sluice library: the client that enqueues, the
// worker pool with fenced leases, crash accounting and quarantine,
// upcasters, durable workflow steps (Step), death handlers and dead-letter
// routing, periodic jobs (Periodic), the maintenance loops, and Control,
// the operator surface.
//
// The engine knows no store, no screen and no transport. It is handed a
// store (backend/sqlite, backend/postgres, backend/redis) that implements
// the contract in package backend. Every write reaches the store as a plan
// the engine resolved (backend's plans and action specs): the store
// translates it and decides nothing.
//
// The value types the engine and the stores share — Job, State, Filter,
// Checkpoint and the errors — live in package sluicetype; engine names
// each of them again (engine.Job is sluicetype.Job), so a program imports
// engine alone.
package engine

//go:generate go run ../internal/aliasgen ../sluicetype github.com/sluicehq/sluice/sluicetype engine -o sluicetype.go NoSuchID CheckQueryTime CheckJSONDepth CheckStorableJSON StorableText ValidateName
