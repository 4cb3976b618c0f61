package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicehq/sluice/engine"
)

// Replay from a step: POST /jobs/{id}/replay creates the new job; GET
// /jobs/{id}/replay?step=N previews what it would keep and run again.

// replayRequest is the body of POST /jobs/{id}/replay.
type replayRequest struct {
	Step   int             `json:"step"`
	Result json.RawMessage `json:"result,omitempty"`
	ID     string          `json:"id,omitempty"`
}

func (s *Server) replay(r *http.Request, c *caller, body []byte) (runFunc, error) {
	var req replayRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.Step < 1 {
		return nil, badRequest("step required: the 1-based position of the first step that runs again")
	}
	id := r.PathValue("id")
	return func(ctx context.Context) (*reply, error) {
		j, err := s.ctl.ReplayFromStep(ctx, id, engine.ReplayParams{Step: req.Step, Result: req.Result, ID: req.ID})
		if err != nil {
			return nil, err
		}
		return &reply{status: http.StatusCreated, body: jobResponse{Job: redactJob(c, j)},
			header: http.Header{"Location": {Prefix + "/jobs/" + url.PathEscape(j.ID)}}}, nil
	}, nil
}

func (s *Server) replayPreview(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	if err := knownParams(v, "step"); err != nil {
		return err
	}
	step, err := intParam(v, "step")
	if err != nil {
		return err
	}
	plan, err := s.ctl.ReplayPreview(r.Context(), r.PathValue("id"), engine.ReplayParams{Step: step})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, redactPlan(c, plan))
	return nil
}

// ReplayFromStep creates a new job that runs job id from p.Step on.
func (c *Client) ReplayFromStep(ctx context.Context, id string, p engine.ReplayParams) (*engine.Job, error) {
	return c.jobCall(ctx, "POST", "/jobs/"+esc(id)+"/replay", replayRequest{Step: p.Step, Result: p.Result, ID: p.ID})
}

// ReplayPreview says what a replay of job id from p.Step would keep and
// run again.
func (c *Client) ReplayPreview(ctx context.Context, id string, p engine.ReplayParams) (*engine.ReplayPlan, error) {
	v := url.Values{}
	v.Set("step", strconv.Itoa(p.Step))
	var out engine.ReplayPlan
	if _, err := c.do(ctx, &call{method: "GET", path: "/jobs/" + esc(id) + "/replay", query: v, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
