package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("zone %s: %v", name, err)
	}
	return loc
}

// TestPeriodicDST: a 02:30 schedule in Europe/Berlin has no tick on the
// spring-forward day (02:30 does not exist on 2026-03-29) and one tick,
// at the first 02:30, on the fall-back day (2026-10-25, when 02:30 comes
// twice); an hourly schedule fires once per wall-clock hour across both.
func TestPeriodicDST(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, berlin) }
	at := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, berlin) }
	for _, tc := range []struct {
		name, cron string
		from, to   time.Time
		want       []string // wall times in Berlin with the offset
	}{
		{"spring forward, 02:30 does not exist", "30 2 * * *", day(2026, 3, 28), day(2026, 3, 31),
			[]string{"2026-03-28 02:30 +0100", "2026-03-30 02:30 +0200"}},
		{"fall back, 02:30 twice, fired once", "30 2 * * *", day(2026, 10, 24), day(2026, 10, 27),
			[]string{"2026-10-24 02:30 +0200", "2026-10-25 02:30 +0200", "2026-10-26 02:30 +0100"}},
		{"hourly on fall-back night", "0 * * * *", at(2026, 10, 25, 0, 30), at(2026, 10, 25, 4, 0),
			[]string{"2026-10-25 01:00 +0200", "2026-10-25 02:00 +0200", "2026-10-25 03:00 +0100", "2026-10-25 04:00 +0100"}},
		{"hourly on spring-forward night", "0 * * * *", at(2026, 3, 29, 0, 30), at(2026, 3, 29, 3, 0),
			[]string{"2026-03-29 01:00 +0100", "2026-03-29 03:00 +0200"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := validatePeriodic(Periodic{Name: "n", Cron: tc.cron, Zone: "Europe/Berlin", Job: EnqueueParams{Kind: "k"}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for x := d.tick.next(tc.from); !x.IsZero() && !x.After(tc.to); x = d.tick.next(x) {
				got = append(got, x.In(berlin).Format("2006-01-02 15:04 -0700"))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("ticks\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestPeriodicRefusesBadInput: every malformed schedule is refused at
// AddPeriodic with ErrInvalid and a message naming the schedule and the
// fault.
func TestPeriodicRefusesBadInput(t *testing.T) {
	job := EnqueueParams{Kind: "k"}
	for _, tc := range []struct {
		p    Periodic
		want string
	}{
		{Periodic{Name: "bad-cron", Cron: "61 * * * *", Job: job}, `schedule "bad-cron": cron "61 * * * *"`},
		{Periodic{Name: "four-fields", Cron: "* * * *", Job: job}, `schedule "four-fields": cron "* * * *"`},
		{Periodic{Name: "zone", Cron: "@hourly", Zone: "Mars/Olympus", Job: job}, `schedule "zone": unknown time zone "Mars/Olympus"`},
		{Periodic{Name: "local", Cron: "@hourly", Zone: "Local", Job: job}, `schedule "local": zone "Local"`},
		{Periodic{Name: "fast", Every: 500 * time.Millisecond, Job: job}, `schedule "fast": interval 500ms fires more than once a second`},
		{Periodic{Name: "fast-desc", Cron: "@every 100ms", Job: job}, `schedule "fast-desc": interval 100ms fires more than once a second`},
		{Periodic{Name: "both", Cron: "@hourly", Every: time.Hour, Job: job}, `schedule "both": both a cron expression`},
		{Periodic{Name: "none", Job: job}, `schedule "none": neither`},
		{Periodic{Name: "never", Cron: "0 0 30 2 *", Job: job}, `schedule "never": cron "0 0 30 2 *" never fires`},
		{Periodic{Name: "bad-every", Cron: "@every soon", Job: job}, `schedule "bad-every": cron "@every soon": interval`},
		{Periodic{Name: "idset", Every: time.Minute, Job: EnqueueParams{Kind: "k", ID: "x"}}, `schedule "idset": the job's ID`},
		{Periodic{Name: "nokind", Every: time.Minute}, `schedule "nokind": job: `},
		{Periodic{Name: "bad name!", Every: time.Minute, Job: job}, `schedule name "bad name!"`},
	} {
		t.Run(tc.p.Name, func(t *testing.T) {
			e := &Engine{}
			err := e.AddPeriodic(tc.p)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("AddPeriodic = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	e := &Engine{}
	if err := e.AddPeriodic(Periodic{Name: "fast-ok", Every: 250 * time.Millisecond, AllowSubSecond: true, Job: job}); err != nil {
		t.Fatalf("sub-second with AllowSubSecond: %v", err)
	}
	if err := e.AddPeriodic(Periodic{Name: "fast-ok", Every: time.Second, Job: job}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a name added twice: %v", err)
	}
}

// TestPeriodicDueTicks: the missed policies after a downtime of ten
// ticks, and an interval's ticks aligned on the epoch.
func TestPeriodicDueTicks(t *testing.T) {
	base := time.Unix(1_800_000_000, 0).UTC() // a multiple of a minute
	for _, tc := range []struct {
		name  string
		p     Periodic
		last  time.Time
		now   time.Time
		fired []time.Time
	}{
		{"on time", Periodic{Every: time.Minute}, base, base.Add(time.Minute + time.Second), []time.Time{base.Add(time.Minute)}},
		{"nothing due", Periodic{Every: time.Minute}, base, base.Add(59 * time.Second), nil},
		{"skip after downtime", Periodic{Every: time.Minute, Grace: 10 * time.Second}, base, base.Add(10*time.Minute + 30*time.Second), nil},
		{"skip keeps a tick within grace", Periodic{Every: time.Minute}, base, base.Add(10*time.Minute + 30*time.Second), []time.Time{base.Add(10 * time.Minute)}},
		{"run once", Periodic{Every: time.Minute, Missed: MissedRunOnce}, base, base.Add(10*time.Minute + 30*time.Second), []time.Time{base.Add(10 * time.Minute)}},
		{"run each bounded", Periodic{Every: time.Minute, Missed: MissedRunEach, MissedMax: 3}, base, base.Add(10*time.Minute + 30*time.Second),
			[]time.Time{base.Add(8 * time.Minute), base.Add(9 * time.Minute), base.Add(10 * time.Minute)}},
		{"cron run each", Periodic{Cron: "* * * * *", Missed: MissedRunEach, MissedMax: 2}, base, base.Add(5*time.Minute + time.Second),
			[]time.Time{base.Add(4 * time.Minute), base.Add(5 * time.Minute)}},
		{"unaligned start", Periodic{Every: time.Second, Missed: MissedRunEach}, base.Add(300 * time.Millisecond), base.Add(2500 * time.Millisecond),
			[]time.Time{base.Add(time.Second), base.Add(2 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.Name, tc.p.Job = "n", EnqueueParams{Kind: "k"}
			d, err := validatePeriodic(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			_, got := dueTicks(d, tc.last, tc.now)
			if len(got) != len(tc.fired) {
				t.Fatalf("fired %v, want %v", got, tc.fired)
			}
			for i := range got {
				if !got[i].Equal(tc.fired[i]) {
					t.Fatalf("fired %v, want %v", got, tc.fired)
				}
			}
		})
	}
}

// TestRecentTicks: a schedule's last ticks up to its last one, oldest
// first, none before its creation, over a weekend gap and a
// spring-forward night.
func TestRecentTicks(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(s string) time.Time {
		t.Helper()
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, c := range []struct {
		name, spec, zone string
		created, last    time.Time
		want             []string
	}{
		{"every second", "@every 1s", "UTC", utc("2026-12-07T10:00:00Z"), utc("2026-12-07T10:00:10Z"),
			[]string{"10:00:06", "10:00:07", "10:00:08", "10:00:09", "10:00:10"}},
		{"fewer since creation", "@every 1s", "UTC", utc("2026-12-07T10:00:07.5Z"), utc("2026-12-07T10:00:10Z"),
			[]string{"10:00:08", "10:00:09", "10:00:10"}},
		{"weekdays over a weekend", "0 9 * * 1-5", "UTC", utc("2026-11-01T00:00:00Z"), utc("2026-12-07T09:00:00Z"),
			[]string{"Dec 01 09:00", "Dec 02 09:00", "Dec 03 09:00", "Dec 04 09:00", "Dec 07 09:00"}},
		{"spring forward", "30 2 * * *", "Europe/Berlin", utc("2026-03-01T00:00:00Z"), time.Date(2026, 3, 31, 2, 30, 0, 0, berlin),
			nil},
		{"none fired yet", "@hourly", "UTC", utc("2026-12-07T10:00:00Z"), utc("2026-12-07T10:00:00Z"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := recentTicks(c.spec, c.zone, c.created, c.last, 5)
			if c.name == "spring forward" {
				// The days before the last; 2026-03-29 has no 02:30 and
				// fires at its first instant after (see TestPeriodicDST).
				want, err := NextTicks(c.spec, c.zone, c.last.Add(-5*24*time.Hour), 5)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 5 || !got[4].Equal(c.last) || !slicesEqualTimes(got, want) {
					t.Fatalf("recent %v, want %v ending at %v", got, want, c.last)
				}
				return
			}
			var s []string
			for _, tk := range got {
				if c.spec == "@every 1s" {
					s = append(s, tk.UTC().Format("15:04:05"))
				} else {
					s = append(s, tk.UTC().Format("Jan 02 15:04"))
				}
			}
			if strings.Join(s, ",") != strings.Join(c.want, ",") {
				t.Fatalf("recent %v, want %v", s, c.want)
			}
		})
	}
}

func slicesEqualTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
