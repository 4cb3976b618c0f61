package api

import (
	"bufio"
	"io"
	"strings"
)

// sseEvent is one server-sent event; a comment (heartbeat) is an event
// with neither name nor data.
type sseEvent struct {
	name string
	data string
}

// sseReader reads the text/event-stream format: fields up to a blank line
// make an event; lines starting with ':' are comments.
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	return &sseReader{sc: sc}
}

// next returns the next event or comment.
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for r.sc.Scan() {
		line := strings.TrimSuffix(r.sc.Text(), "\r")
		if line == "" {
			if seen {
				ev.data = strings.Join(data, "\n")
				return ev, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			if !seen {
				return sseEvent{}, nil // a heartbeat
			}
			continue
		}
		seen = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.name = value
		case "data":
			data = append(data, value)
		}
	}
	if err := r.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}
