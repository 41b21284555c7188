package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

func newRegisterCmd(g *globals) *cobra.Command {
	var (
		in         switchboard.Instance
		caps, meta []string
		hb, ttl    string
		tr         trafficFlags
		ck         checkFlags
	)
	cmd := &cobra.Command{
		Use:   "register --name N --type T --address A [--capability C]... [--meta k=v]... [--ttl D] [--heartbeat D]",
		Short: "Register an instance, print it as one JSON line, heartbeat until interrupted, then deregister",
		Long: `Register an instance in the catalog and keep it alive: the stored instance is printed as one
JSON line on stdout, then the process heartbeats until Ctrl-C or SIGTERM, when it deregisters
(deletes its row) and exits 0. A second Ctrl-C exits at once, without deregistering (the row then
expires after its TTL). If the row disappears meanwhile (reaped, deregistered by hand, catalog
restored from a backup), the next heartbeat registers it again.

The name is sanitised to an RFC 1123 label (lowercase, other characters become "-", at most 48, keeping the tail);
when that changes it, stderr says what is stored. With only --ttl, the heartbeat is derived:
min(3s, ttl/3), and at least 10ms. The heartbeat must be at least 10ms and at most ttl/2, so the
ttl at least 20ms. Invalid input exits 2 and writes nothing (not even a new database file).`,
		Example: `  switchboard register --name querier --type querier --address 127.0.0.1:50054 --capability query_execution
  switchboard register --name writer --type writer --address '[::1]:50051' \
      --capability storage --capability trace_ingestion --meta zone=eu-1 --ttl 2s
  switchboard register --name edge --type router --address nats://edge.in --id edge-1 --version 1.4.0`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var missing []string
			for _, f := range []string{"name", "type", "address"} {
				if !cmd.Flags().Changed(f) {
					missing = append(missing, "--"+f)
				}
			}
			if len(missing) > 0 {
				return usage(requiredError(missing))
			}
			var hbFlag, ttlFlag time.Duration
			var err error
			if hb != "" {
				if hbFlag, err = switchboard.ParseDuration("--heartbeat", hb); err != nil {
					return usage(err)
				}
			}
			if ttl != "" {
				if ttlFlag, err = switchboard.ParseDuration("--ttl", ttl); err != nil {
					return usage(err)
				}
			}
			// The flags take part in validation (heartbeat against ttl) as
			// the final values, over the file and the environment.
			c, err := g.config(func(c *config.Config) {
				if hbFlag > 0 {
					c.Discovery.HeartbeatInterval = hbFlag
				}
				if ttlFlag > 0 {
					c.Discovery.TTL = ttlFlag
				}
				tr.apply(cmd, c)
			})
			if err != nil {
				return err
			}
			interval := c.Discovery.HeartbeatInterval
			in.TTL = c.Discovery.TTL
			in.Weight, in.Zone = c.Discovery.Weight, c.Discovery.Zone
			in.Capabilities = caps
			if in.Metadata, err = parseMeta(meta); err != nil {
				return usage(err)
			}
			checkOnly := ck.target != "" && !cmd.Flags().Changed("ttl") && !cmd.Flags().Changed("heartbeat")
			if err := ck.apply(&in, c, checkOnly); err != nil {
				return usage(err)
			}
			// Validate everything before the catalog is opened: bad input
			// writes nothing, not even a new database file.
			norm, err := switchboard.Normalize(in)
			if err != nil {
				return usage(g.nameSource(c, err))
			}
			noteSanitised(g, in.Name, norm.Name)
			ctx := cmd.Context()
			cat, err := g.open(ctx, c, true)
			if err != nil {
				return err
			}
			defer cat.Close()
			if checkOnly {
				// Liveness is the check's alone: the catalog's check
				// runners keep the row while they probe it.
				return registerCheckOnly(ctx, g, cat, in)
			}
			reg, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: interval, Logger: g.log,
				DrainWait: drainWait(c)})
			if err != nil {
				return err
			}
			line, err := json.Marshal(reg.Instance())
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s\n", line)
			g.log.Info("heartbeating", "id", reg.ID(), "interval", interval, "ttl", in.TTL)
			<-ctx.Done()
			return reg.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Name, "name", "", "service or module name (sanitised to an RFC 1123 label; required)")
	f.StringVar(&in.Type, "type", "", "role: acceptor, writer, router, querier, compactor, or any token (required)")
	f.StringVar(&in.Address, "address", "", "host:port ([v6]:port) or nats://subject (required)")
	f.StringArrayVar(&caps, "capability", nil, "capability token (repeatable)")
	f.StringVar(&in.Version, "version", "", "version string")
	f.StringArrayVar(&meta, "meta", nil, "metadata key=value (repeatable)")
	f.StringVar(&in.ID, "id", "", "stable instance id (default: a new UUID)")
	f.StringVar(&hb, "heartbeat", "", "heartbeat interval, at least 10ms and at most ttl/2 (default from config, else min(3s, ttl/3))")
	f.StringVar(&ttl, "ttl", "", "liveness TTL (default from config: 10s)")
	g.addSecretFlag(cmd, "over a server DSN, the instance's secret, chosen here so that deregister --secret can use it from elsewhere (16 to 256 printable ASCII characters; default: the server's; "+envSecret+")")
	bindKey(f, "heartbeat", "discovery.heartbeat_interval")
	bindKey(f, "ttl", "discovery.ttl")
	tr.flags(f)
	ck.flags(f)
	cmd.Annotations = map[string]string{
		annEnv:  strings.Join([]string{envDSNHelp, envTTLHelp, envHeartbeatHelp, envPollHelp, envSecretHelp, envTrafficHelp}, "\n"),
		annExit: exitLong,
	}
	return cmd
}

// requiredError names the missing flags: "--name is required",
// "--name, --type and --address are required".
func requiredError(flags []string) error {
	if len(flags) == 1 {
		return fmt.Errorf("%s is required", flags[0])
	}
	return fmt.Errorf("%s and %s are required", strings.Join(flags[:len(flags)-1], ", "), flags[len(flags)-1])
}

// noteSanitised tells the user, on stderr, when the stored name differs from
// the one they typed.
func noteSanitised(g *globals, typed, stored string) {
	if typed != stored {
		fmt.Fprintf(g.stderr, "switchboard: name %q is stored as %q\n", typed, stored)
	}
}

func parseMeta(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	md := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &switchboard.FieldError{Field: "--meta", Value: kv, Reason: "want key=value"}
		}
		md[k] = v
	}
	return md, nil
}
