package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicehq/sluice/engine"
)

// Periodic jobs' schedules: GET /schedules pages them; pause and resume
// (admin, as a queue's) and trigger, a run now (operator, as an enqueue).

// scheduleStateResponse answers a schedule action.
type scheduleStateResponse struct {
	Schedule string `json:"schedule"`
	Action   string `json:"action"`
}

func (s *Server) schedules(w http.ResponseWriter, r *http.Request, _ *caller) error {
	v, err := query(r)
	if err != nil {
		return err
	}
	limit, cursor, err := parseOperationsQuery(v)
	if err != nil {
		return err
	}
	page, err := s.ctl.Schedules(r.Context(), limit, cursor)
	if err != nil {
		return err
	}
	// A schedule holds no payload nor metadata: a viewer reads it whole
	// (api/viewer.go's rules have nothing to take out).
	if page.Schedules == nil {
		page.Schedules = []engine.ScheduleInfo{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) scheduleAction(action string) func(*http.Request, *caller, []byte) (runFunc, error) {
	return func(r *http.Request, _ *caller, body []byte) (runFunc, error) {
		if err := noBody(body); err != nil {
			return nil, err
		}
		name := r.PathValue("name")
		return func(ctx context.Context) (*reply, error) {
			var err error
			switch action {
			case "pause":
				err = s.ctl.PauseSchedule(ctx, name)
			case "resume":
				err = s.ctl.ResumeSchedule(ctx, name)
			default:
				err = s.ctl.TriggerSchedule(ctx, name)
			}
			if err != nil {
				return nil, err
			}
			return ok(scheduleStateResponse{Schedule: name, Action: action}), nil
		}, nil
	}
}

// Schedules pages the server's schedules.
func (c *Client) Schedules(ctx context.Context, limit int, after string) (*engine.SchedulePage, error) {
	v := url.Values{}
	if limit != 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		v.Set("cursor", after)
	}
	var page engine.SchedulePage
	if _, err := c.do(ctx, &call{method: "GET", path: "/schedules", query: v, out: &page}); err != nil {
		return nil, err
	}
	return &page, nil
}

func (c *Client) PauseSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, &call{method: "POST", path: "/schedules/" + esc(name) + "/pause"})
	return err
}

func (c *Client) ResumeSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, &call{method: "POST", path: "/schedules/" + esc(name) + "/resume"})
	return err
}

func (c *Client) TriggerSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, &call{method: "POST", path: "/schedules/" + esc(name) + "/trigger"})
	return err
}
