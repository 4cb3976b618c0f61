package engine

import "sync"

// Admitting suspects: jobs that crashed before.
//
// A crash is charged to every job that was running in a process that died,
// the poison pill and the innocents beside it alike. Two rules keep the
// innocents from being dragged to the crash limit while letting them come
// back at close to the normal rate:
//
//   - Jobs on their first crash run in a group per process that starts at
//     one and doubles with each of them that succeeds, up to the
//     concurrency; a crash of one (a panic: the process lives) shrinks it
//     back to one, and a process that dies starts again at one. So after a
//     mass crash the innocents ramp up to full speed in a few rounds, and a
//     pill among them takes down at most one group with it.
//   - Jobs that crashed twice or more run alone: only in a process that
//     runs nothing else, and nothing else starts beside them. The pill then
//     reaches the crash limit by itself, and an innocent of its group —
//     at two crashes — never runs beside anything that could crash it a
//     third time.
//
// So an innocent reaches at most two crashes from a pill, and only the pill
// reaches the crash limit (default 3). (A process killed from outside
// charges its jobs too; three such kills of the same job quarantine it, as
// they should: nothing tells them apart from a pill.)

// suspectGate is one process's admission of suspects, shared by its queue
// runners.
type suspectGate struct {
	mu sync.Mutex
	// max caps group (the largest queue concurrency).
	max int
	// group is how many first-crash suspects may run at once.
	group int
	// first counts the first-crash suspects running or being claimed.
	first int
	// claiming counts claims in flight; a lone claim needs it at 0.
	claiming int
	// lone is set while a lone claim is in flight or its job is held:
	// until its outcome is written (a success is written by the
	// completer after the handler returns), so nothing that could crash
	// the process starts before the store has it.
	lone bool
}

func newSuspectGate(most int) *suspectGate {
	return &suspectGate{max: max(1, most), group: 1}
}

// admit is what one claim may take: n first-crash suspects, and whether
// it may take a lone job (only when the process holds no job: idle). ok
// is false while a lone job is held (or being claimed): nothing else may
// start then. Every admit is followed by one claimed.
func (g *suspectGate) admit(idle bool) (n int, lone, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lone {
		return 0, false, false
	}
	n = max(0, g.group-g.first)
	g.first += n
	if idle && g.claiming == 0 {
		lone, g.lone = true, true
	}
	g.claiming++
	return n, lone, true
}

// claimed records what a claim admitted by admit(n, lone) took: took
// first-crash suspects, and tookLone whether its job is a lone one (then
// the lone hold stays until that job is released).
func (g *suspectGate) claimed(n int, lone bool, took int, tookLone bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.claiming--
	g.first -= n - took
	if lone && !tookLone {
		g.lone = false
	}
}

// done records the end of a first-crash suspect's run: whether it
// crashed (a panic; a success or an ordinary failure counts as not
// crashing).
func (g *suspectGate) done(kind suspectKind, crashed bool) {
	if kind != suspectFirst {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.first--
	if crashed {
		g.group = 1
	} else {
		g.group = min(2*g.group, g.max)
	}
}

// dropped records that a first-crash suspect held ahead of a slot was
// handed back without running: it neither crashed nor succeeded, so the
// group stays as it is.
func (g *suspectGate) dropped(kind suspectKind) {
	if kind != suspectFirst {
		return
	}
	g.mu.Lock()
	g.first--
	g.mu.Unlock()
}

// released records that the process no longer holds a job: its outcome
// is written (or its lease is gone). A lone job's hold ends there.
func (g *suspectGate) released(kind suspectKind) {
	if kind != suspectLone {
		return
	}
	g.mu.Lock()
	g.lone = false
	g.mu.Unlock()
}

// suspectKind sorts a claimed job for admission.
type suspectKind int

const (
	notSuspect suspectKind = iota
	suspectFirst
	suspectLone
)

func suspectOf(j *Job) suspectKind {
	switch {
	case j.CrashAttempt >= 2:
		return suspectLone
	case j.CrashAttempt == 1:
		return suspectFirst
	}
	return notSuspect
}
