// Package testlog is for tests that read what other goroutines log.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers and a reader: the
// destination of a test's slog handler while an engine or a client pool
// logs from its own goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
