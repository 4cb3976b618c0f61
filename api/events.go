package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// The event stream: GET /events answers text/event-stream, one event per
// engine.Change:
//
//	event: change
//	data: {"kind":"job","job_id":"...","queue":"billing","state":"available"}
//
// with a comment line (": ping") every Heartbeat so that proxies keep the
// connection and clients notice a dead one. When the engine behind the
// server cannot reach its store, the stream says so once per outage:
//
//	event: lost
//	data: {"error":"sqlite: job counts: disk I/O error","reason":"unavailable"}
//
// and the "resync" change that follows says it is back. A client that
// knows only "change" events skips it.

const (
	sseEventChange = "change"
	sseEventLost   = "lost"
)

// lostEvent is the data of a "lost" event.
type lostEvent struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, _ *caller) error {
	ctx := r.Context()
	// Subscribe before answering: a client that sees the 200 has a live
	// subscription, and no change made after that is missed.
	ch, err := s.ctl.Subscribe(ctx)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives any write timeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: connected\n\n"); err != nil {
		return nil
	}
	if err := rc.Flush(); err != nil {
		return nil
	}
	tick := time.NewTicker(s.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case c, open := <-ch:
			if !open {
				return nil
			}
			name, body := sseEventChange, any(c)
			if c.Kind == engine.ChangeLost {
				// The engine's word that its store is away: a console
				// attached here says so at once, not at its next probe.
				msg := "store unavailable"
				if c.Err != nil {
					msg = c.Err.Error()
				}
				name, body = sseEventLost, lostEvent{Error: msg, Reason: reasonUnavailable}
			}
			data, err := json.Marshal(body)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data); err != nil {
				return nil
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
