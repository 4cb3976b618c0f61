// Package api serves engine.Control over HTTP (Server) and consumes it
// (Client).
//
// The server is an http.Handler for the routes under /api/v1 (and
// /metrics), mountable in an existing mux. It adds what a network needs and
// the engine must not know about: bearer tokens with roles, read-only mode,
// idempotency keys on every mutation, request limits, a metrics hook
// (ServerOptions.Metrics; the Prometheus one is in package apimetrics, so
// that a program that only wants the Client does not build Prometheus) and
// server-sent events. The client implements engine.Control over those
// routes, so the console and the command line work the same against an
// embedded engine or a remote one.
//
// The package knows the engine's types and nothing of any store: errors
// cross the wire as a status code and a short reason, and the client maps
// them back to the engine's sentinel errors (errors.Is works on both
// sides). See openapi.yaml for the routes, and examples/server for a
// service that mounts the server in its own mux behind its own middleware.
package api
