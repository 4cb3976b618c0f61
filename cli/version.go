package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// The release build stamps these with the linker (scripts/release:
// -ldflags "-X github.com/sluicehq/sluice/cli.version=… -X …cli.commit=…").
// -X can set nothing but package-level string variables; nothing assigns
// them at run time.
var (
	version string
	commit  string
)

// buildVersion is what `sluice version` says: the stamped version and
// commit, else what the Go toolchain recorded (the module version of `go
// install …@v1.2.3`, the VCS revision of a `go build` in a checkout).
type buildVersion struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func describeVersion(stampedVersion, stampedCommit string, bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: stampedVersion, Commit: stampedCommit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		v.Go = bi.GoVersion
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.modified":
				if stampedCommit == "" {
					v.Modified = s.Value == "true"
				}
			}
		}
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

func (v buildVersion) String() string {
	c := v.Commit
	if v.Modified {
		c += "+modified"
	}
	return fmt.Sprintf("sluice %s (commit %s, %s, %s)", v.Version, c, v.Go, v.Platform)
}

func currentVersion() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return describeVersion(version, commit, bi)
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			switch output {
			case "json":
				return printJSON(cmd.OutOrStdout(), v)
			case "", "text":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), v)
				return err
			}
			return fmt.Errorf("-o %q: want text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
