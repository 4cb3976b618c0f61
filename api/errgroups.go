package api

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice/engine"
)

// Error groups: the listing (GET /error-groups, ignored=true takes in
// the ignored groups) and an operator's verdicts on one group (POST
// /error-groups/{id}/resolve, ignore, unignore).

// errorGroupRequest is the body of a resolve or an ignore: the note, or
// no body at all.
type errorGroupRequest struct {
	Note string `json:"note"`
}

type errorGroupResponse struct {
	Group *engine.ErrorGroup `json:"group"`
}

func (s *Server) errorGroups(w http.ResponseWriter, r *http.Request, c *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	ignored, err := boolParam(v, "ignored")
	if err != nil {
		return err
	}
	v.Del("ignored")
	f, err := parseFilterQuery(v)
	if err != nil {
		return err
	}
	if err := checkFilter(c, &f); err != nil {
		return err
	}
	gs, err := s.ctl.ListErrorGroups(r.Context(), engine.ListErrorGroupsParams{Filter: f, Ignored: ignored})
	if err != nil {
		return err
	}
	gs = redactErrorGroups(c, gs)
	if gs == nil {
		gs = []engine.ErrorGroup{}
	}
	writeJSON(w, http.StatusOK, errorGroupsResponse{Groups: gs})
	return nil
}

// errorGroupAction resolves (with a note), ignores (with a note) or
// un-ignores (open, no body) the group of the path's id.
func (s *Server) errorGroupAction(status engine.GroupStatus) func(*http.Request, *caller, []byte) (runFunc, error) {
	return func(r *http.Request, c *caller, body []byte) (runFunc, error) {
		var req errorGroupRequest
		if status == engine.GroupOpen {
			if err := noBody(body); err != nil {
				return nil, err
			}
		} else if len(body) > 0 {
			if err := decodeStrict(body, &req); err != nil {
				return nil, err
			}
		}
		id := r.PathValue("id")
		return func(ctx context.Context) (*reply, error) {
			var g *engine.ErrorGroup
			var err error
			switch status {
			case engine.GroupResolved:
				g, err = s.ctl.ResolveErrorGroup(ctx, engine.ErrorGroupResolveParams{ID: id, Note: req.Note})
			case engine.GroupIgnored:
				g, err = s.ctl.IgnoreErrorGroup(ctx, engine.ErrorGroupIgnoreParams{ID: id, Note: req.Note})
			default:
				g, err = s.ctl.UnignoreErrorGroup(ctx, engine.ErrorGroupUnignoreParams{ID: id})
			}
			if err != nil {
				return nil, err
			}
			rg := redactErrorGroups(c, []engine.ErrorGroup{*g})[0]
			return ok(errorGroupResponse{Group: &rg}), nil
		}, nil
	}
}

func (c *Client) ErrorGroups(ctx context.Context, f engine.Filter) ([]engine.ErrorGroup, error) {
	return c.ListErrorGroups(ctx, engine.ListErrorGroupsParams{Filter: f})
}

func (c *Client) ListErrorGroups(ctx context.Context, p engine.ListErrorGroupsParams) ([]engine.ErrorGroup, error) {
	q := filterQuery(p.Filter)
	if p.Ignored {
		q.Set("ignored", "true")
	}
	var out errorGroupsResponse
	if _, err := c.do(ctx, &call{method: "GET", path: "/error-groups", query: q, out: &out}); err != nil {
		return nil, err
	}
	return out.Groups, nil
}

func (c *Client) ResolveErrorGroup(ctx context.Context, p engine.ErrorGroupResolveParams) (*engine.ErrorGroup, error) {
	return c.errorGroupCall(ctx, p.ID, "resolve", &errorGroupRequest{Note: p.Note})
}

func (c *Client) IgnoreErrorGroup(ctx context.Context, p engine.ErrorGroupIgnoreParams) (*engine.ErrorGroup, error) {
	return c.errorGroupCall(ctx, p.ID, "ignore", &errorGroupRequest{Note: p.Note})
}

func (c *Client) UnignoreErrorGroup(ctx context.Context, p engine.ErrorGroupUnignoreParams) (*engine.ErrorGroup, error) {
	return c.errorGroupCall(ctx, p.ID, "unignore", nil)
}

// errorGroupCall posts a verdict to the group's route and returns the group
// answered.
func (c *Client) errorGroupCall(ctx context.Context, id, action string, body *errorGroupRequest) (*engine.ErrorGroup, error) {
	cl := &call{method: "POST", path: "/error-groups/" + esc(id) + "/" + action}
	if body != nil {
		b, err := jsonBody(body)
		if err != nil {
			return nil, err
		}
		cl.body = b
	}
	var out errorGroupResponse
	cl.out = &out
	if _, err := c.do(ctx, cl); err != nil {
		return nil, err
	}
	return out.Group, nil
}
