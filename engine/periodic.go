package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sluicehq/sluice/sluicetype"
)

// Periodic declares a job enqueued on a schedule: a cron expression or an
// interval, in a time zone, with what to do about ticks missed while no
// process ran and about a tick that comes while the previous job is still
// under way. Every process that declares the same schedule (AddPeriodic)
// takes part; each tick is enqueued once, whatever their number, because
// its job's id is derived from the schedule's name and the tick
// ("sched:<name>:<tick in Unix milliseconds>") and an enqueue by id is
// idempotent. The store keeps each schedule's newest tick, its pause and
// any pending "run now" (backend.ScheduleStore).
//
// Daylight saving: a cron expression is read in Zone's wall clock, by
// github.com/robfig/cron/v3. On the spring-forward day a wall time that
// does not exist (02:30 in Europe/Berlin on the last Sunday of March) has
// no tick: the schedule does not fire that day, as robfig/cron decides.
// On the fall-back day a wall time that happens twice (02:30 on the last
// Sunday of October) fires once, at its first occurrence (robfig/cron
// would fire both; the engine passes over a tick whose wall time is the
// previous tick's). An interval (Every, "@every") is absolute time and
// knows no zone.
type Periodic struct {
	// Name identifies the schedule in the store and in the jobs' ids;
	// it matches sluicetype.NamePattern.
	Name string
	// Cron is a standard five-field expression ("30 2 * * *") or a
	// descriptor ("@hourly", "@daily", "@every 90s"). Set it or Every.
	Cron string
	// Every fires at each multiple of the interval since the Unix epoch,
	// so every process computes the same ticks.
	Every time.Duration
	// Zone is the IANA time zone Cron is read in ("Europe/Berlin"); UTC
	// when empty. "Local" is refused: it means another zone on each host.
	Zone string
	// Job is what each tick enqueues. Its ID must be empty (the engine
	// sets it); its metadata gets the key "sluice" holding
	// {"schedule": Name, "tick": RFC 3339}, so a filter
	// meta.sluice.schedule:NAME lists the schedule's jobs.
	Job EnqueueParams
	// JobFunc, when set, builds the job for a tick instead of Job. Two
	// processes building different content for one tick enqueue it once
	// all the same (the second gets ErrConflict, taken as fired).
	JobFunc func(tick time.Time) EnqueueParams
	// Missed says what happens to ticks that passed while no process ran.
	Missed MissedPolicy
	// MissedMax bounds MissedRunEach: the newest MissedMax missed ticks
	// run (10 when 0).
	MissedMax int
	// Grace is how late a tick may still fire under MissedSkip (one
	// minute when 0).
	Grace time.Duration
	// Overlap says what a tick does while the schedule's previous job is
	// still available, scheduled, running or retryable.
	Overlap OverlapPolicy
	// AllowSubSecond lets Every be under a second.
	AllowSubSecond bool
}

// MissedPolicy says what a schedule does with ticks missed while no
// process ran it.
type MissedPolicy int

const (
	// MissedSkip passes over missed ticks: only a tick at most Grace old
	// fires.
	MissedSkip MissedPolicy = iota
	// MissedRunOnce fires the newest missed tick, once, for all of them.
	MissedRunOnce
	// MissedRunEach fires each missed tick, up to the newest MissedMax.
	MissedRunEach
)

// OverlapPolicy says whether a tick fires while the schedule's previous
// job is still under way.
type OverlapPolicy int

const (
	// OverlapAllow fires every tick.
	OverlapAllow OverlapPolicy = iota
	// OverlapSkip passes over a tick while the previous job of the
	// schedule is available, scheduled, running or retryable.
	OverlapSkip
)

// periodicDefaults.
const (
	defaultMissedMax = 10
	defaultGrace     = time.Minute
)

// ticker computes a schedule's ticks.
type ticker interface {
	// next is the first tick after after, or zero when there is none.
	next(after time.Time) time.Time
}

// everyTicker ticks at each multiple of d since the Unix epoch.
type everyTicker struct{ d time.Duration }

func (t everyTicker) next(after time.Time) time.Time {
	n := after.UnixNano()
	k := n / int64(t.d)
	if n < 0 && n%int64(t.d) != 0 {
		k--
	}
	return time.Unix(0, (k+1)*int64(t.d)).UTC()
}

// cronTicker reads a cron schedule in loc's wall clock.
type cronTicker struct {
	s   cron.Schedule
	loc *time.Location
}

func (t cronTicker) next(after time.Time) time.Time {
	a := after.In(t.loc)
	n := t.s.Next(a)
	// On the fall-back day robfig/cron answers the same wall time an
	// hour later: it is the same tick, once.
	if !n.IsZero() && sameWall(n, a) {
		n = t.s.Next(n)
	}
	return n
}

func sameWall(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute() && a.Second() == b.Second()
}

// cronParser reads the five standard fields and the descriptors.
func cronParser() cron.Parser {
	return cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
}

// parseSpec reads a schedule's expression in zone: a cron expression,
// a descriptor or "@every <duration>". The returned spec is the text the
// store keeps (an interval as "@every <d>").
func parseSpec(expr string, every time.Duration, zone string, allowSubSecond bool) (ticker, string, *time.Location, error) {
	if zone == "Local" {
		return nil, "", nil, fmt.Errorf("zone %q means another zone on each host: name one (Europe/Berlin, UTC)", zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, "", nil, fmt.Errorf("unknown time zone %q: %v", zone, err)
	}
	expr = strings.TrimSpace(expr)
	switch {
	case expr != "" && every != 0:
		return nil, "", nil, fmt.Errorf("both a cron expression (%q) and an interval (%s): give one", expr, every)
	case expr == "" && every == 0:
		return nil, "", nil, fmt.Errorf("neither a cron expression nor an interval")
	}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, "", nil, fmt.Errorf("cron %q: interval: %v", expr, err)
		}
		expr, every = "", d
	}
	if expr == "" {
		switch {
		case every <= 0:
			return nil, "", nil, fmt.Errorf("interval %s is not positive", every)
		case every%time.Millisecond != 0:
			return nil, "", nil, fmt.Errorf("interval %s is not a whole number of milliseconds", every)
		case every < time.Second && !allowSubSecond:
			return nil, "", nil, fmt.Errorf("interval %s fires more than once a second (set AllowSubSecond to allow it)", every)
		}
		return everyTicker{d: every}, "@every " + every.String(), loc, nil
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, "", nil, fmt.Errorf("cron %q: give the zone in Zone, not in the expression", expr)
	}
	s, err := cronParser().Parse(expr)
	if err != nil {
		return nil, "", nil, fmt.Errorf("cron %q: %v", expr, err)
	}
	t := cronTicker{s: s, loc: loc}
	// robfig/cron looks five years ahead: an expression with no tick
	// there (February 30th) never fires.
	if t.next(time.Now()).IsZero() {
		return nil, "", nil, fmt.Errorf("cron %q never fires", expr)
	}
	return t, expr, loc, nil
}

// periodicDef is a validated Periodic.
type periodicDef struct {
	Periodic
	tick ticker
	spec string
	zone string
}

// validatePeriodic checks p; its errors name the schedule and what is
// wrong, and match ErrInvalid.
func validatePeriodic(p Periodic) (*periodicDef, error) {
	if err := sluicetype.ValidateName("schedule", p.Name); err != nil {
		return nil, err
	}
	tick, spec, loc, err := parseSpec(p.Cron, p.Every, p.Zone, p.AllowSubSecond)
	if err != nil {
		return nil, fmt.Errorf("%w: schedule %q: %v", ErrInvalid, p.Name, err)
	}
	if p.JobFunc == nil {
		if p.Job.ID != "" {
			return nil, fmt.Errorf("%w: schedule %q: the job's ID is set by the engine; leave it empty", ErrInvalid, p.Name)
		}
		if err := sluicetype.ValidateName("kind", p.Job.Kind); err != nil {
			return nil, fmt.Errorf("schedule %q: job: %w", p.Name, err)
		}
		if len(p.Job.Metadata) > 0 {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(p.Job.Metadata, &m); err != nil {
				return nil, fmt.Errorf("%w: schedule %q: job metadata is not a JSON object", ErrInvalid, p.Name)
			}
		}
	}
	switch p.Missed {
	case MissedSkip, MissedRunOnce, MissedRunEach:
	default:
		return nil, fmt.Errorf("%w: schedule %q: unknown missed policy %d", ErrInvalid, p.Name, p.Missed)
	}
	switch p.Overlap {
	case OverlapAllow, OverlapSkip:
	default:
		return nil, fmt.Errorf("%w: schedule %q: unknown overlap policy %d", ErrInvalid, p.Name, p.Overlap)
	}
	if p.MissedMax < 0 || p.Grace < 0 {
		return nil, fmt.Errorf("%w: schedule %q: MissedMax and Grace may not be negative", ErrInvalid, p.Name)
	}
	if p.MissedMax == 0 {
		p.MissedMax = defaultMissedMax
	}
	if p.Grace == 0 {
		p.Grace = defaultGrace
	}
	return &periodicDef{Periodic: p, tick: tick, spec: spec, zone: loc.String()}, nil
}

// AddPeriodic declares a schedule this engine fires (see Periodic). Add
// schedules before Start; a malformed one is refused with an error that
// names it and matches ErrInvalid.
func (e *Engine) AddPeriodic(p Periodic) error {
	d, err := validatePeriodic(p)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started.Load() {
		return fmt.Errorf("%w: add schedule %q before Start", ErrInvalid, p.Name)
	}
	if e.periodic == nil {
		e.periodic = map[string]*periodicDef{}
	}
	if _, dup := e.periodic[p.Name]; dup {
		return fmt.Errorf("%w: schedule %q added twice", ErrInvalid, p.Name)
	}
	e.periodic[p.Name] = d
	return nil
}

// NextTicks returns the next n ticks after from of a schedule given as
// the store keeps it (spec and zone), or an error naming what is wrong.
func NextTicks(spec, zone string, from time.Time, n int) ([]time.Time, error) {
	t, _, _, err := parseSpec(spec, 0, zone, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	out := make([]time.Time, 0, n)
	for range n {
		from = t.next(from)
		if from.IsZero() {
			break
		}
		out = append(out, from)
	}
	return out, nil
}

// scheduleJobID is the id of the job a schedule enqueues for a tick;
// a run now is "sched:<name>:now:<ms>".
func scheduleJobID(name string, tick time.Time) string {
	return "sched:" + name + ":" + strconv.FormatInt(tick.UnixMilli(), 10)
}

func scheduleNowID(name string, at time.Time) string {
	return "sched:" + name + ":now:" + strconv.FormatInt(at.UnixMilli(), 10)
}
