package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// routeTable lists every route with the least role it needs. Finer rules
// (payloads need inspector, deletion needs admin) are in the handlers.
func (s *Server) routeTable() []route {
	const (
		viewer   = engine.RoleViewer
		operator = engine.RoleOperator
		admin    = engine.RoleAdmin
	)
	p := Prefix
	return []route{
		{method: "GET", path: p + "/jobs", role: viewer, read: s.listJobs},
		{method: "POST", path: p + "/jobs", role: operator, action: "enqueue", mutate: s.enqueue},
		{method: "GET", path: p + "/jobs/export", role: viewer, read: s.exportJobs, stream: true},
		{method: "GET", path: p + "/jobs/counts", role: viewer, read: s.counts},
		{method: "GET", path: p + "/jobs/counts/filter", role: viewer, read: s.countJobs},
		{method: "GET", path: p + "/jobs/{id}", role: viewer, read: s.getJob},
		{method: "DELETE", path: p + "/jobs/{id}", role: admin, action: "delete", mutate: s.deleteJob},
		{method: "POST", path: p + "/jobs/{id}/retry", role: operator, action: "retry", mutate: s.retry},
		{method: "POST", path: p + "/jobs/{id}/cancel", role: operator, action: "cancel", mutate: s.jobAction(engine.ActionCancel)},
		{method: "POST", path: p + "/jobs/{id}/release", role: operator, action: "release", mutate: s.jobAction(engine.ActionRelease)},
		{method: "POST", path: p + "/jobs/{id}/retry-with-input", role: operator, action: "retry_with_input", mutate: s.retryWithInput},
		{method: "POST", path: p + "/jobs/{id}/replay", role: operator, action: "replay", mutate: s.replay},
		{method: "GET", path: p + "/jobs/{id}/replay", role: viewer, read: s.replayPreview},
		{method: "PUT", path: p + "/jobs/{id}/payload", role: operator, action: "patch", mutate: s.updatePayload},
		{method: "POST", path: p + "/jobs/{id}/signals/{name}", role: operator, action: "signal", mutate: s.signal},
		{method: "POST", path: p + "/jobs/actions", role: operator, action: "apply", mutate: s.actions},
		{method: "POST", path: p + "/jobs/bulk", role: operator, action: "bulk", mutate: s.bulk},
		{method: "GET", path: p + "/error-groups", role: viewer, read: s.errorGroups},
		{method: "POST", path: p + "/error-groups/{id}/resolve", role: operator, action: "resolve_error_group", mutate: s.errorGroupAction(engine.GroupResolved)},
		{method: "POST", path: p + "/error-groups/{id}/ignore", role: operator, action: "ignore_error_group", mutate: s.errorGroupAction(engine.GroupIgnored)},
		{method: "POST", path: p + "/error-groups/{id}/unignore", role: operator, action: "unignore_error_group", mutate: s.errorGroupAction(engine.GroupOpen)},
		{method: "GET", path: p + "/operations", role: viewer, read: s.operations},
		{method: "GET", path: p + "/operations/{id}", role: viewer, read: s.operation},
		{method: "GET", path: p + "/audit", role: viewer, read: s.audit},
		{method: "POST", path: p + "/operations/{id}/cancel", role: operator, action: "cancel_operation", mutate: s.cancelOperation},
		{method: "POST", path: p + "/operations/{id}/resume", role: operator, action: "resume_operation", mutate: s.resumeOperation},
		{method: "GET", path: p + "/quarantine", role: viewer, read: s.quarantine},
		{method: "DELETE", path: p + "/quarantine/{fingerprint}", role: operator, action: "release_fingerprint", mutate: s.releaseFingerprint},
		{method: "GET", path: p + "/queues", role: viewer, read: s.queues},
		{method: "POST", path: p + "/queues/{queue}/pause", role: admin, action: "pause", mutate: s.queuePause(true)},
		{method: "POST", path: p + "/queues/{queue}/resume", role: admin, action: "resume", mutate: s.queuePause(false)},
		{method: "GET", path: p + "/limits", role: viewer, read: s.limits},
		{method: "PUT", path: p + "/limits", role: admin, action: "set_limit", mutate: s.limitSet},
		{method: "GET", path: p + "/schedules", role: viewer, read: s.schedules},
		{method: "POST", path: p + "/schedules/{name}/pause", role: admin, action: "pause_schedule", mutate: s.scheduleAction("pause")},
		{method: "POST", path: p + "/schedules/{name}/resume", role: admin, action: "resume_schedule", mutate: s.scheduleAction("resume")},
		{method: "POST", path: p + "/schedules/{name}/trigger", role: operator, action: "trigger_schedule", mutate: s.scheduleAction("trigger")},
		{method: "GET", path: p + "/events", role: viewer, read: s.events},
		{method: "GET", path: p + "/healthz", read: s.healthz},
		{method: "GET", path: p + "/readyz", read: s.readyz},
		{method: "GET", path: p + "/meta", role: viewer, read: s.meta},
		{method: "GET", path: "/metrics", role: viewer, read: s.serveMetrics},
	}
}

// query parses the query string strictly: a malformed one is refused, not
// read in part.
func query(r *http.Request) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("malformed query string: %v", err)
	}
	return v, nil
}

// etag is a job version as an entity tag.
func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// parseIfMatch reads the version an If-Match header names.
func parseIfMatch(h string) (int64, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, newHTTPError(http.StatusPreconditionRequired, reasonPreconditionNeeded,
			"If-Match required: send the job's ETag (its version) from GET /jobs/{id}, so a concurrent edit is not overwritten")
	}
	v := strings.Trim(strings.TrimPrefix(h, "W/"), `"`)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("If-Match %q does not name a job version (an ETag such as \"7\")", h)
	}
	return n, nil
}

type jobResponse struct {
	Job *engine.Job `json:"job"`
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	p, err := parseListQuery(v)
	if err != nil {
		return err
	}
	if err := checkFilter(c, &p.Filter); err != nil {
		return err
	}
	page, err := s.ctl.ListJobs(r.Context(), p)
	if err != nil {
		return err
	}
	page.Jobs = redactAll(c, page.Jobs)
	if page.Jobs == nil {
		page.Jobs = []*engine.Job{}
	}
	writeJobPage(w, page)
	return nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	if err := knownParams(v, "include_payload"); err != nil {
		return err
	}
	withPayload, err := boolParam(v, "include_payload")
	if err != nil {
		return err
	}
	if withPayload {
		if err := c.need(engine.RoleInspector, "read payloads"); err != nil {
			return err
		}
	}
	d, err := s.ctl.GetJob(r.Context(), r.PathValue("id"), withPayload)
	if err != nil {
		return err
	}
	d = redactDetail(c, d)
	if d.Job != nil {
		w.Header().Set("ETag", etag(d.Job.Version))
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) counts(w http.ResponseWriter, r *http.Request, _ *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	if err := knownParams(v, "queue"); err != nil {
		return err
	}
	q, err := singleParam(v, "queue")
	if err != nil {
		return err
	}
	cs, err := s.ctl.Counts(r.Context(), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cs)
	return nil
}

// countJobs answers GET /jobs/counts/filter: the filter's jobs per state,
// each counted exactly up to max.
func (s *Server) countJobs(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	if err := knownParams(v, "state", "queue", "kind", "q", "max", "whole"); err != nil {
		return err
	}
	var p engine.CountJobsParams
	if ms, err := singleParam(v, "max"); err != nil {
		return err
	} else if ms != "" {
		if p.Max, err = strconv.ParseInt(ms, 10, 64); err != nil {
			return badRequest("max: %q is not an integer", ms)
		}
	}
	if ws, err := singleParam(v, "whole"); err != nil {
		return err
	} else if ws != "" {
		if p.Whole, err = strconv.ParseBool(ws); err != nil {
			return badRequest("whole: %q is not a boolean", ws)
		}
	}
	v.Del("max")
	v.Del("whole")
	if p.Filter, err = parseFilterQuery(v); err != nil {
		return err
	}
	if err := checkFilter(c, &p.Filter); err != nil {
		return err
	}
	cs, err := s.ctl.CountJobs(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cs)
	return nil
}

// noBody refuses a body on a route that takes none, beyond an empty
// object.
func noBody(body []byte) error {
	if len(body) == 0 {
		return nil
	}
	var empty struct{}
	return decodeStrict(body, &empty)
}

func (s *Server) enqueue(r *http.Request, c *caller, body []byte) (runFunc, error) {
	if s.enq == nil {
		return nil, fmt.Errorf("%w: this server's engine does not take enqueues over HTTP", engine.ErrUnsupported)
	}
	ps, batch, err := decodeEnqueue(body)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (*reply, error) {
		res, err := s.enq.EnqueueMany(ctx, ps)
		if err != nil {
			return nil, err
		}
		if !batch {
			if res[0].Err != nil {
				return nil, res[0].Err
			}
			status := http.StatusCreated
			if res[0].Existing {
				status = http.StatusOK
			}
			return &reply{status: status, body: enqueueResult{Job: res[0].Job, Existing: res[0].Existing}}, nil
		}
		out := enqueueBatchResponse{Results: make([]enqueueResult, len(res))}
		for i, r := range res {
			out.Results[i] = enqueueResult{Job: r.Job, Existing: r.Existing}
			if r.Err != nil {
				_, eb := errorResponse(r.Err)
				out.Results[i] = enqueueResult{Error: r.Err.Error(), Reason: eb.Reason}
			}
		}
		return ok(out), nil
	}, nil
}

func (s *Server) deleteJob(r *http.Request, _ *caller, body []byte) (runFunc, error) {
	if err := noBody(body); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	return func(ctx context.Context) (*reply, error) {
		if err := s.ctl.Delete(ctx, id); err != nil {
			return nil, err
		}
		return ok(deletedResponse{ID: id, Deleted: true}), nil
	}, nil
}

func (s *Server) retry(r *http.Request, c *caller, body []byte) (runFunc, error) {
	var req retryRequest
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return nil, err
		}
	}
	id := r.PathValue("id")
	return func(ctx context.Context) (*reply, error) {
		j, err := s.ctl.Retry(ctx, id, engine.RetryOptions{Force: req.Force, Deadline: req.Deadline})
		if err != nil {
			return nil, err
		}
		return ok(jobResponse{Job: redactJob(c, j)}), nil
	}, nil
}

// jobAction is a body-less action on one job: cancel or release.
func (s *Server) jobAction(a engine.Action) func(*http.Request, *caller, []byte) (runFunc, error) {
	return func(r *http.Request, c *caller, body []byte) (runFunc, error) {
		if err := noBody(body); err != nil {
			return nil, err
		}
		id := r.PathValue("id")
		return func(ctx context.Context) (*reply, error) {
			var j *engine.Job
			var err error
			if a == engine.ActionCancel {
				j, err = s.ctl.Cancel(ctx, id)
			} else {
				j, err = s.ctl.ReleaseJob(ctx, id)
			}
			if err != nil {
				return nil, err
			}
			return ok(jobResponse{Job: redactJob(c, j)}), nil
		}, nil
	}
}

func (s *Server) retryWithInput(r *http.Request, c *caller, body []byte) (runFunc, error) {
	var req retryWithInputRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if len(req.Payload) == 0 {
		return nil, badRequest("payload required: the corrected payload of the new job")
	}
	id := r.PathValue("id")
	return func(ctx context.Context) (*reply, error) {
		j, err := s.ctl.RetryWithInput(ctx, id, engine.RetryWithInputParams{ID: req.ID, Payload: req.Payload})
		if err != nil {
			return nil, err
		}
		return &reply{status: http.StatusCreated, body: jobResponse{Job: redactJob(c, j)},
			header: http.Header{"Location": {Prefix + "/jobs/" + url.PathEscape(j.ID)}}}, nil
	}, nil
}

func (s *Server) updatePayload(r *http.Request, c *caller, body []byte) (runFunc, error) {
	version, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, badRequest("request body required: the new payload, a JSON object")
	}
	id := r.PathValue("id")
	return func(ctx context.Context) (*reply, error) {
		j, err := s.ctl.UpdatePayload(ctx, id, json.RawMessage(body), version)
		if errors.Is(err, engine.ErrConflict) {
			return nil, newHTTPError(http.StatusPreconditionFailed, reasonConflict,
				"job %s changed since version %d (%v); reload it and edit again", id, version, err)
		}
		if err != nil {
			return nil, err
		}
		return &reply{status: http.StatusOK, body: jobResponse{Job: redactJob(c, j)},
			header: http.Header{"Etag": {etag(j.Version)}}}, nil
	}, nil
}

// needForAction is the least role an action needs: deletion is admin's.
func needForAction(c *caller, a engine.Action) error {
	if a == engine.ActionDelete {
		return c.need(engine.RoleAdmin, "delete jobs")
	}
	return nil
}

func (s *Server) actions(_ *http.Request, c *caller, body []byte) (runFunc, error) {
	req, err := decodeActions(body)
	if err != nil {
		return nil, err
	}
	if err := needForAction(c, req.Action); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (*reply, error) {
		res, err := s.ctl.Apply(ctx, req.Action, req.IDs)
		if err != nil {
			return nil, err
		}
		out := actionsResponse{Results: res}
		for _, r := range res {
			if r.OK {
				out.Succeeded++
			} else {
				out.Failed++
			}
		}
		return ok(out), nil
	}, nil
}

func (s *Server) bulk(_ *http.Request, c *caller, body []byte) (runFunc, error) {
	p, err := decodeBulk(body)
	if err != nil {
		return nil, err
	}
	if err := needForAction(c, p.Action); err != nil {
		return nil, err
	}
	if err := checkFilter(c, &p.Selector); err != nil {
		return nil, err
	}
	if p.Plan != nil {
		if err := checkFilter(c, &p.Plan.Selector); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) (*reply, error) {
		res, err := s.ctl.Bulk(ctx, p)
		if err != nil {
			return nil, err
		}
		res.Sample = redactAll(c, res.Sample)
		if p.DryRun || res.Operation == nil {
			return ok(res), nil
		}
		return &reply{status: http.StatusAccepted, body: res,
			header: http.Header{"Location": {Prefix + "/operations/" + url.PathEscape(res.Operation.ID)}}}, nil
	}, nil
}

func (s *Server) operations(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	limit, cursor, err := parseOperationsQuery(v)
	if err != nil {
		return err
	}
	page, err := s.ctl.Operations(r.Context(), limit, cursor)
	if err != nil {
		return err
	}
	if page.Operations == nil {
		page.Operations = []*engine.Operation{}
	}
	for i, op := range page.Operations {
		page.Operations[i] = redactOperation(c, op)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) operation(w http.ResponseWriter, r *http.Request, c *caller) error {
	op, err := s.ctl.Operation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, redactOperation(c, op))
	return nil
}

func (s *Server) cancelOperation(r *http.Request, _ *caller, body []byte) (runFunc, error) {
	if err := noBody(body); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	return func(ctx context.Context) (*reply, error) {
		op, err := s.ctl.CancelOperation(ctx, id)
		if err != nil {
			return nil, err
		}
		return ok(op), nil
	}, nil
}

func (s *Server) resumeOperation(r *http.Request, _ *caller, body []byte) (runFunc, error) {
	if err := noBody(body); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	return func(ctx context.Context) (*reply, error) {
		op, err := s.ctl.ResumeOperation(ctx, id)
		if err != nil {
			return nil, err
		}
		return ok(op), nil
	}, nil
}

func (s *Server) quarantine(w http.ResponseWriter, r *http.Request, c *caller) error {
	fps, err := s.ctl.Quarantine(r.Context())
	if err != nil {
		return err
	}
	fps = redactFingerprints(c, fps)
	if fps == nil {
		fps = []*engine.Fingerprint{}
	}
	writeJSON(w, http.StatusOK, fingerprintsResponse{Fingerprints: fps})
	return nil
}

func (s *Server) releaseFingerprint(r *http.Request, _ *caller, body []byte) (runFunc, error) {
	if err := noBody(body); err != nil {
		return nil, err
	}
	fp := r.PathValue("fingerprint")
	return func(ctx context.Context) (*reply, error) {
		n, err := s.ctl.ReleaseFingerprint(ctx, fp)
		if err != nil {
			return nil, err
		}
		return ok(releasedResponse{Released: n}), nil
	}, nil
}

func (s *Server) queues(w http.ResponseWriter, r *http.Request, _ *caller) error {
	qs, err := s.ctl.Queues(r.Context())
	if err != nil {
		return err
	}
	if qs == nil {
		qs = []engine.QueueInfo{}
	}
	writeJSON(w, http.StatusOK, queuesResponse{Queues: qs})
	return nil
}

func (s *Server) queuePause(pause bool) func(*http.Request, *caller, []byte) (runFunc, error) {
	return func(r *http.Request, _ *caller, body []byte) (runFunc, error) {
		if err := noBody(body); err != nil {
			return nil, err
		}
		q := r.PathValue("queue")
		return func(ctx context.Context) (*reply, error) {
			var err error
			if pause {
				err = s.ctl.PauseQueue(ctx, q)
			} else {
				err = s.ctl.ResumeQueue(ctx, q)
			}
			if err != nil {
				return nil, err
			}
			return ok(queueStateResponse{Queue: q, Paused: pause}), nil
		}, nil
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz answers 200 when the store answers: it reads the counters (or,
// on a store without the operator surface, the quarantine list).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ *caller) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	_, err := s.ctl.Counts(ctx, "")
	if errors.Is(err, engine.ErrUnsupported) {
		_, err = s.ctl.Quarantine(ctx)
	}
	if err != nil {
		return newHTTPError(http.StatusServiceUnavailable, reasonUnavailable, "store not ready: %v", err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// meta describes the backend and the caller: its role, name and whether
// the server is read-only.
func (s *Server) meta(w http.ResponseWriter, r *http.Request, c *caller) error {
	m, err := s.ctl.Meta(r.Context())
	if err != nil {
		return err
	}
	out := *m
	out.Role = c.id.Role
	out.ReadOnly = s.opts.ReadOnly || m.ReadOnly
	out.Actor = c.actor
	out.Idempotency = "memory"
	if s.idem.Durable() {
		out.Idempotency = "store"
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// signal sends a signal to a job; the body is its payload (any JSON, null
// when empty).
func (s *Server) signal(r *http.Request, _ *caller, body []byte) (runFunc, error) {
	if len(body) > 0 && !json.Valid(body) {
		return nil, badRequest("the body is the signal's payload and must be JSON")
	}
	id, name := r.PathValue("id"), r.PathValue("name")
	return func(ctx context.Context) (*reply, error) {
		sig, err := s.ctl.Signal(ctx, id, name, json.RawMessage(body))
		if err != nil {
			return nil, err
		}
		return ok(signalResponse{Signal: signalSent{JobID: sig.JobID, Name: sig.Name, Seq: sig.Seq, SentAt: sig.SentAt}}), nil
	}, nil
}
