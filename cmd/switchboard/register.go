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
	)
	cmd := &cobra.Command{
		Use:   "register --name N --type T --address A [--capability C]... [--meta k=v]...",
		Short: "Register an instance, print it as one JSON line, heartbeat until interrupted, then deregister",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var hbFlag, ttlFlag time.Duration
			var err error
			if hb != "" {
				if hbFlag, err = switchboard.ParseDuration("heartbeat", hb); err != nil {
					return usage(err)
				}
			}
			if ttl != "" {
				if ttlFlag, err = switchboard.ParseDuration("ttl", ttl); err != nil {
					return usage(err)
				}
			}
			// The flags take part in validation (heartbeat shorter than ttl)
			// as the final values, over the file and the environment.
			c, err := g.config(func(c *config.Config) {
				if hbFlag > 0 {
					c.Discovery.HeartbeatInterval = hbFlag
				}
				if ttlFlag > 0 {
					c.Discovery.TTL = ttlFlag
				}
			})
			if err != nil {
				return err
			}
			interval := c.Discovery.HeartbeatInterval
			in.TTL = c.Discovery.TTL
			in.Capabilities = caps
			if in.Metadata, err = parseMeta(meta); err != nil {
				return usage(err)
			}
			// Validate everything before the catalog is opened: bad input
			// writes nothing, not even a new database file.
			if _, err := switchboard.Normalize(in); err != nil {
				return usage(err)
			}
			ctx := cmd.Context()
			cat, err := g.open(ctx, c, true)
			if err != nil {
				return err
			}
			defer cat.Close()
			reg, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: interval, Logger: g.log})
			if err != nil {
				return err
			}
			line, err := json.Marshal(reg.Instance())
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s\n", line)
			<-ctx.Done()
			return reg.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Name, "name", "", "service or module name (sanitised to an RFC 1123 label)")
	f.StringVar(&in.Type, "type", "", "role: acceptor, writer, router, querier, compactor, or any token")
	f.StringVar(&in.Address, "address", "", "host:port ([v6]:port) or nats://subject")
	f.StringArrayVar(&caps, "capability", nil, "capability token (repeatable)")
	f.StringVar(&in.Version, "version", "", "version string")
	f.StringArrayVar(&meta, "meta", nil, "metadata key=value (repeatable)")
	f.StringVar(&in.ID, "id", "", "stable instance id (default: a new UUID)")
	f.StringVar(&hb, "heartbeat", "", "heartbeat interval (default from config: 3s)")
	f.StringVar(&ttl, "ttl", "", "liveness TTL (default from config: 10s)")
	return cmd
}

func parseMeta(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	md := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &switchboard.FieldError{Field: "meta", Value: kv, Reason: "want key=value"}
		}
		md[k] = v
	}
	return md, nil
}
