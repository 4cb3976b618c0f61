package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// sluice schedules: periodic jobs' schedules, paused, resumed, run now.

func newSchedulesCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{Use: "schedules", Short: "List, pause, resume and run periodic jobs' schedules",
		Long: `List the schedules of periodic jobs that programs declare (engine.Periodic),
with their next fires, last job and its state, and dead jobs; pause or resume
one (every process passes over its ticks while paused), or trigger a run now,
on a server (--api) or directly on a store (--store). A schedule no process
declares any more is listed as gone. RECENT is the last five ticks, oldest
first, as the console's :schedules draws them: ✓ completed, ✗ dead, • under
way, - cancelled, · no job (passed over, missed or deleted).`}
	o.addFlags(cmd)
	list := &cobra.Command{
		Use:   "list",
		Short: "List schedules",
		Args:  cobra.NoArgs,
		RunE: runCall(o, func(_ *cobra.Command, s *session, _ []string) ([]engine.ScheduleInfo, error) {
			var all []engine.ScheduleInfo
			after := ""
			for {
				page, err := s.ctl.Schedules(s.ctx, 200, after)
				if err != nil {
					return nil, err
				}
				all = append(all, page.Schedules...)
				if page.Next == "" {
					return all, nil
				}
				after = page.Next
			}
		}, tableOf("SCHEDULE\tSPEC\tZONE\tSTATUS\tNEXT\tLAST JOB\tLAST STATE\tDEAD\tRECENT", scheduleRow)),
	}
	action := func(verb, short string, call func(c engine.Control, s *session, name string) error) *cobra.Command {
		return &cobra.Command{
			Use:   verb + " SCHEDULE",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: runCall(o, func(_ *cobra.Command, s *session, args []string) (map[string]any, error) {
				err := call(s.ctl, s, args[0])
				return map[string]any{"schedule": args[0], "action": verb}, err
			}, func(w io.Writer, v map[string]any) error {
				fmt.Fprintf(w, "schedule %s: %s\n", v["schedule"], map[string]string{
					"pause": "paused", "resume": "resumed", "trigger": "run now asked; the next process to look enqueues it",
				}[verb])
				return nil
			}),
		}
	}
	cmd.AddCommand(list,
		action("pause", "Pass over a schedule's ticks in every process until resumed",
			func(c engine.Control, s *session, n string) error { return c.PauseSchedule(s.ctx, n) }),
		action("resume", "Let a schedule fire again from its next tick",
			func(c engine.Control, s *session, n string) error { return c.ResumeSchedule(s.ctx, n) }),
		action("trigger", "Run a schedule now, once",
			func(c engine.Control, s *session, n string) error { return c.TriggerSchedule(s.ctx, n) }),
	)
	return cmd
}

// scheduleStatus is a schedule's state in a word: gone, paused or active,
// and a pending run now.
func scheduleStatus(s engine.ScheduleInfo) string {
	st := "active"
	switch {
	case s.Gone:
		st = "gone"
	case s.Paused:
		st = "paused"
	}
	if s.RunNowPending {
		st += "+run-now"
	}
	return st
}

func scheduleRow(s engine.ScheduleInfo) []string {
	next := "-"
	if len(s.Next) > 0 {
		next = s.Next[0].UTC().Format(time.RFC3339)
	}
	last, state := "-", "-"
	if s.LastJob != "" {
		last = s.LastJob
	}
	if s.LastState != "" {
		state = string(s.LastState)
	}
	return []string{s.Name, s.Spec, s.Zone, scheduleStatus(s), next, last, state, fmt.Sprint(s.Dead), recentRuns(s.Recent)}
}

// recentRuns writes a schedule's last ticks, oldest first, a mark each
// (engine.ScheduleRun.Mark, as the console's :schedules draws them). A
// schedule with no tick yet reads "none", not a mark.
func recentRuns(rs []engine.ScheduleRun) string {
	if len(rs) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Mark())
	}
	return b.String()
}
