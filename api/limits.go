package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Limits: GET /limits lists the concurrency limits across processes, PUT
// /limits sets one (concurrency 0 removes it).

type (
	limitsResponse struct {
		Limits []engine.Limit `json:"limits"`
	}
	limitSetRequest struct {
		Scope engine.LimitScope `json:"scope"`
		Name  string            `json:"name"`
		// Concurrency is a pointer so that a body without it is refused
		// rather than read as 0, which removes the limit.
		Concurrency *int   `json:"concurrency"`
		Key         string `json:"key,omitempty"`
		Rate        int    `json:"rate,omitempty"`
		// RateWindow is in nanoseconds, as every duration on the wire.
		RateWindow int64 `json:"rate_window,omitempty"`
	}
)

func (s *Server) limits(w http.ResponseWriter, r *http.Request, _ *caller) error {
	ls, err := s.ctl.ListLimits(r.Context())
	if err != nil {
		return err
	}
	if ls == nil {
		ls = []engine.Limit{}
	}
	writeJSON(w, http.StatusOK, limitsResponse{Limits: ls})
	return nil
}

func (s *Server) limitSet(_ *http.Request, _ *caller, body []byte) (runFunc, error) {
	var req limitSetRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.Concurrency == nil {
		return nil, fmt.Errorf("%w: concurrency is required (0: none; with no rate either, removes the limit)", engine.ErrInvalid)
	}
	return func(ctx context.Context) (*reply, error) {
		l := engine.Limit{Scope: req.Scope, Name: req.Name, Concurrency: *req.Concurrency, Key: req.Key,
			Rate: req.Rate, RateWindow: time.Duration(req.RateWindow)}
		if err := s.ctl.SetLimit(ctx, l); err != nil {
			return nil, err
		}
		return ok(l), nil
	}, nil
}
