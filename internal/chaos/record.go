package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice/backend"
	"github.com/sluicehq/sluice/engine"
	// The modernc.org/sqlite driver, registered as "sqlite" by the store.
	_ "github.com/sluicehq/sluice/backend/sqlite"
)

// The side table: what the workers saw, kept apart from the store under
// test. It is a SQLite file of its own, whatever the store is, because
//   - the store fault on SQLite locks the store's file against every
//     writer: records written there would wait on the very outage they
//     witness, and a harness that cuts or restarts a PostgreSQL or Redis
//     server would lose them with it;
//   - the checker compares the store with an account the store did not
//     write: a record in the store's own transaction would share its bugs;
//   - one file works for every backend, so the checker is one query per
//     table on every store.
//
// Each row is written after the fact and outside the store's
// transaction, so a process killed at the wrong instant loses its last
// rows: the checker counts rows it misses (unrecorded) and never reads an
// absent row as a write that did not happen.
const sideSchema = `
CREATE TABLE IF NOT EXISTS executions (
	job_id TEXT NOT NULL, fence INTEGER NOT NULL, attempt INTEGER NOT NULL,
	crash_attempt INTEGER NOT NULL, kind TEXT NOT NULL, process TEXT NOT NULL,
	pid INTEGER NOT NULL, at_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS writes (
	op TEXT NOT NULL, job_id TEXT NOT NULL, lease_id TEXT NOT NULL,
	fence INTEGER NOT NULL, process TEXT NOT NULL, accepted INTEGER NOT NULL,
	err TEXT NOT NULL, at_ns INTEGER NOT NULL);
`

// Write ops in the side table.
const (
	OpClaim    = "claim"
	OpComplete = "complete"
	OpFinish   = "finish" // followed by ":" and the state written
)

// Recorder writes the side table of one worker process.
type Recorder struct {
	db  *sql.DB
	pid int
	mu  sync.Mutex
	err error // the first write error, reported once
}

func sideDSN(path string) string {
	// A long busy timeout: a process frozen by SIGSTOP in the middle of
	// its insert holds the file's lock until it is thawed.
	return path + "?_pragma=busy_timeout(120000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// CreateSideTable creates the side table's file.
func CreateSideTable(path string) error {
	db, err := sql.Open("sqlite", sideDSN(path))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(sideSchema); err != nil {
		return fmt.Errorf("side table %s: %w", path, err)
	}
	return nil
}

// OpenRecorder opens the side table at path for writing.
func OpenRecorder(path string) (*Recorder, error) {
	db, err := sql.Open("sqlite", sideDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(sideSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("side table %s: %w", path, err)
	}
	return &Recorder{db: db, pid: os.Getpid()}, nil
}

// Close closes the side table.
func (r *Recorder) Close() error { return r.db.Close() }

func (r *Recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
		fmt.Fprintf(os.Stderr, "chaos: side table write failed (rows from now on may be missing): %v\n", err)
	}
}

// Execution records a handler run of j (under its lease) in process.
func (r *Recorder) Execution(j *engine.Job, process string) {
	fence := j.Fence
	if j.Lease != nil {
		fence = j.Lease.Fence
	}
	_, err := r.db.Exec(`INSERT INTO executions VALUES (?,?,?,?,?,?,?,?)`,
		j.ID, fence, j.Attempt, j.CrashAttempt, j.Kind, process, r.pid, time.Now().UnixNano())
	if err != nil {
		r.fail(err)
	}
}

// WriteRow is one fenced write a process made and whether the store
// accepted it.
type WriteRow struct {
	Op      string
	Ref     backend.JobRef
	Process string
	Err     error
}

// Writes records fenced writes, in one transaction.
func (r *Recorder) Writes(rows []WriteRow) {
	if len(rows) == 0 {
		return
	}
	tx, err := r.db.BeginTx(context.Background(), nil)
	if err != nil {
		r.fail(err)
		return
	}
	now := time.Now().UnixNano()
	for _, w := range rows {
		accepted, msg := 1, ""
		if w.Err != nil {
			accepted, msg = 0, w.Err.Error()
		}
		if _, err := tx.Exec(`INSERT INTO writes VALUES (?,?,?,?,?,?,?,?)`,
			w.Op, w.Ref.ID, w.Ref.LeaseID, w.Ref.Fence, w.Process, accepted, msg, now); err != nil {
			tx.Rollback()
			r.fail(err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		r.fail(err)
	}
}
