package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/spf13/pflag"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/checks"
	"github.com/switchboard-io/switchboard/config"
)

// checkFlagOf names the flag of each field of a check.
var checkFlagOf = map[string]string{"check.target": "--check", "check.interval": "--check-interval",
	"check.timeout": "--check-timeout", "check.failures": "--check-failures", "check.deregister_after": "--check-deregister-after"}

// checkFlags are register's --check flags.
type checkFlags struct {
	target             string
	interval, timeout  time.Duration
	failures           int
	deregisterCritical time.Duration
}

func (k *checkFlags) flags(f *pflag.FlagSet) {
	f.StringVar(&k.target, "check", "", "an active health check the catalog's servers run: http://…, https://…, tcp://host:port or grpc://host:port[/service]; without --ttl or --heartbeat, liveness is the check's alone and register exits at once")
	f.DurationVar(&k.interval, "check-interval", 10*time.Second, "time between probes, 1s to 1h")
	f.DurationVar(&k.timeout, "check-timeout", 0, "bound of one probe, under the interval (default min(interval/2, 5s))")
	f.IntVar(&k.failures, "check-failures", 0, "consecutive failed probes before critical (default 3)")
	f.DurationVar(&k.deregisterCritical, "check-deregister-after", 0, "delete the row once critical this long (default 10 × interval × failures)")
}

// apply sets in's check from the flags, validated and judged by the
// policy of checks.allow (the server judges it again), and marks a
// check-only registration for the runners to keep alive.
func (k *checkFlags) apply(in *switchboard.Instance, c config.Config, checkOnly bool) error {
	if k.target == "" {
		return nil
	}
	in.Check = &switchboard.Check{Target: k.target, Interval: k.interval, Timeout: k.timeout, Failures: k.failures,
		DeregisterAfter: k.deregisterCritical}
	n, err := switchboard.Normalize(*in)
	if err != nil {
		var fe *switchboard.FieldError
		if errors.As(err, &fe) {
			if flag, ok := checkFlagOf[fe.Field]; ok {
				return flagField(fe, flag)
			}
		}
		return err
	}
	if err := c.Checks.Policy().Check(n); err != nil {
		return flagField(err, "--check")
	}
	if checkOnly {
		in.Metadata = maps.Clone(in.Metadata)
		if in.Metadata == nil {
			in.Metadata = map[string]string{}
		}
		in.Metadata[checks.MetadataCheckOnly] = "true"
	}
	return nil
}

// registerCheckOnly stores a registration whose liveness is its check's,
// prints it and returns: the row stays while the catalog's check runners
// probe it (they renew it), until `switchboard deregister` or its check's
// deregister_after.
func registerCheckOnly(ctx context.Context, g *globals, cat switchboard.Catalog, in switchboard.Instance) error {
	stored, err := cat.Register(ctx, in)
	if err != nil {
		return err
	}
	line, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "%s\n", line)
	if _, ok := cat.(switchboard.HealthSetter); !ok {
		g.log.Warn("this catalog stores no check results: no runner will judge or renew the row", "id", stored.ID)
	}
	return nil
}
