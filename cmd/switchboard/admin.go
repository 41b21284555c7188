package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

// version may be set at build time with -ldflags "-X main.version=…"; by
// default the module version from the build info is used.
var version = ""

func newDeregisterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deregister ID",
		Short: "Delete an instance's row",
		Long: `Delete the row of the instance with this id (watchers see removed/deregistered at once).

An instance whose process is still running is only gone until its next heartbeat, which
registers it again (as Consul does for agent-managed services): stop the process instead, or
use this for rows whose process is gone. Exit 1 when there is no such id.`,
		Example: `  switchboard deregister 3f6c2a9e-8a57-4d0b-9d1e-2b7c1f0e4a11
  switchboard ls --name writer --json | jq -r '.[].id' | xargs -n1 switchboard deregister`,
		Args: oneArg("ID (the instance id, as printed by register or ls)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onInstance(cmd.Context(), args[0], func(cat switchboard.Catalog, _ string) error {
				if err := cat.Deregister(cmd.Context(), args[0]); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "deregistered %s\n", args[0])
				return nil
			})
		},
		Annotations: map[string]string{annEnv: envDSNHelp + "\n" + envSecretHelp},
	}
	g.addSecretFlag(cmd, "over a server DSN, the secret of an instance another client registered (16 to 256 printable ASCII characters; "+envSecret+")")
	return cmd
}

func newReapCmd(g *globals) *cobra.Command {
	var olderThan string
	cmd := &cobra.Command{
		Use:   "reap [--older-than D]",
		Short: "Delete rows stale for twice their own TTL, or last seen more than D ago",
		Long: `Delete the rows of instances that stopped heartbeating, now, and print how many.

Every registered process runs a reaper that does this on its own, so this is
for catalogs nobody is registered in, or to clean up at once. Without --older-than a row goes
when it has not been seen for twice its own TTL, so an active row with a long TTL is never
reaped; with --older-than, every row last seen more than D ago goes, whatever its TTL.`,
		Example: `  switchboard reap
  switchboard reap --older-than 1h`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Zero asks the catalog for each row's own 2 × TTL: a row with a
			// long TTL is never reaped while it is still active.
			var cutoff time.Duration
			if olderThan != "" {
				var err error
				if cutoff, err = switchboard.ParseDuration("--older-than", olderThan); err != nil {
					return usage(err)
				}
			}
			_, cat, err := g.existingCatalog(cmd.Context())
			if err != nil {
				return err
			}
			defer cat.Close()
			n, err := cat.Reap(cmd.Context(), cutoff)
			if err != nil {
				return err
			}
			if cutoff == 0 {
				fmt.Fprintf(g.stdout, "reaped %d rows (stale for twice their ttl)\n", n)
			} else {
				fmt.Fprintf(g.stdout, "reaped %d rows (last seen more than %s ago)\n", n, cutoff.Round(time.Millisecond))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "delete rows last seen more than D ago, whatever their ttl (default: each row's own 2 × ttl)")
	return cmd
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version",
		Long: `Print the module version, the VCS revision the binary was built from (with "modified" when
the work tree had uncommitted changes) and the Go version, from the binary's build info.
'switchboard --version' prints the same.`,
		Example: `  switchboard version
  switchboard --version`,
		Args: noArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(g.stdout, appVersion())
		},
		Annotations: map[string]string{annEnv: "(none)", annExit: "0  success\n2  invalid input"},
	}
}

// appVersion is "switchboard VERSION (revision REV, TIME[, modified]; GO
// OS/ARCH)" from the build info: the module version go build stamps (a tag,
// or a pseudo-version from the commit), unless -X main.version set one.
func appVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(moduleVersion(), bi)
}

func formatVersion(v string, bi *debug.BuildInfo) string {
	rev, at, modified := "", "", false
	goVersion := runtime.Version()
	if bi != nil {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var build []string
	if rev != "" {
		build = append(build, "revision "+rev)
		if at != "" {
			build = append(build, at)
		}
		if modified {
			build = append(build, "modified")
		}
	} else {
		build = append(build, "no VCS revision")
	}
	return fmt.Sprintf("switchboard %s (%s; %s %s/%s)", v, strings.Join(build, ", "), goVersion, runtime.GOOS, runtime.GOARCH)
}

// moduleVersion is -X main.version when set, else the main module's version
// from the build info, else "dev" (go run, tests).
func moduleVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
