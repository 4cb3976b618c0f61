package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// The audit trail over HTTP: GET /audit reads it; every mutating route
// is recorded by the engine (an action refused before it reaches the
// engine by this server, with auditRefusal).

// SurfaceHeader names the surface a request comes from (the console, the
// command line); absent or unknown, the API itself. It is descriptive,
// like ActorHeader: the role and the source are the server's own.
const SurfaceHeader = "Sluice-Surface"

// origin is how r reached the server, for the audit trail: the caller's
// role, the surface its client names, and its source (the remote
// address, or what a Local client was given: an SSH key's fingerprint).
func origin(r *http.Request, c *caller) engine.Origin {
	o := engine.Origin{Role: c.id.Role, Surface: engine.SurfaceAPI, Source: r.RemoteAddr}
	switch s := engine.Surface(r.Header.Get(SurfaceHeader)); s {
	case engine.SurfaceConsole, engine.SurfaceCLI, engine.SurfaceSSH:
		o.Surface = s
	}
	if _, local := localIdentity(r); local {
		if src, ok := r.Context().Value(localSourceKey{}).(string); ok {
			o.Source = src
		}
	}
	return o
}

// localSourceKey carries a Local client's source in its requests.
type localSourceKey struct{}

// auditRefusal records a mutation this server refused before the engine
// saw it (a role short of the route, a read-only server, a key in use by
// another request), when the Control keeps the trail itself. Nothing is
// recorded for a caller not even identified (401): there is no actor.
func (s *Server) auditRefusal(r *http.Request, rt route, c *caller, err error) {
	ap, ok := s.ctl.(engine.AuditAppender)
	if !ok || rt.mutate == nil {
		return
	}
	status, body := errorResponse(err)
	rec := engine.AuditRecord{Action: rt.action, Result: body.Reason, Detail: body.Error}
	if rec.Result == "" {
		rec.Result = strconv.Itoa(status)
	}
	rec.JobID = r.PathValue("id")
	for _, name := range []string{"fingerprint", "queue", "name"} {
		if v := r.PathValue(name); v != "" {
			rec.Target = v
		}
	}
	ctx := engine.WithOrigin(engine.WithActor(context.WithoutCancel(r.Context()), c.actor), origin(r, c))
	if err := ap.AppendAudit(ctx, rec); err != nil && !errors.Is(err, engine.ErrUnsupported) {
		s.log.Warn("audit record of a refusal not written", "route", rt.pattern(), "err", err)
	}
}

func (s *Server) audit(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	q, err := parseAuditQuery(v)
	if err != nil {
		return err
	}
	page, err := s.ctl.Audit(r.Context(), q)
	if err != nil {
		return err
	}
	for i, rec := range page.Records {
		page.Records[i] = redactAudit(c, rec)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// parseAuditQuery reads GET /audit's parameters: actor, action, job,
// operation, since and until (RFC 3339), limit and cursor.
func parseAuditQuery(v url.Values) (engine.AuditQuery, error) {
	var q engine.AuditQuery
	if err := knownParams(v, "actor", "action", "job", "operation", "since", "until", "limit", "cursor"); err != nil {
		return q, err
	}
	var err error
	for name, dst := range map[string]*string{"actor": &q.Actor, "action": &q.Action, "job": &q.JobID,
		"operation": &q.Operation, "cursor": &q.After} {
		if *dst, err = singleParam(v, name); err != nil {
			return q, err
		}
	}
	for name, dst := range map[string]*time.Time{"since": &q.Since, "until": &q.Until} {
		s, err := singleParam(v, name)
		if err != nil || s == "" {
			if err != nil {
				return q, err
			}
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, badRequest("%s %q: want an RFC 3339 time (2026-12-07T21:00:00Z)", name, s)
		}
		*dst = t
	}
	if q.Limit, err = intParam(v, "limit"); err != nil {
		return q, err
	}
	return q, nil
}
