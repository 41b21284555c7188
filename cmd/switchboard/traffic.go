package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

const envTrafficHelp = "SWITCHBOARD_DISCOVERY_WEIGHT, _ZONE, _DRAIN_WAIT  weight, zone and drain wait of the registration (--weight, --zone, --drain-wait win)"

// trafficFlags are the flags of a command that registers an instance:
// its weight and zone, and how long it drains before it deregisters.
type trafficFlags struct {
	weight    int
	zone      string
	drainWait time.Duration
}

func (t *trafficFlags) flags(f *pflag.FlagSet) {
	f.IntVar(&t.weight, "weight", 0, "share of traffic among the instances of its name, 1 to 10000 (default from config: 100)")
	f.StringVar(&t.zone, "zone", "", "locality token, such as eu-west-1a (callers may prefer their own zone)")
	f.DurationVar(&t.drainWait, "drain-wait", 0, "on Ctrl-C, how long to stay registered as draining before deregistering (default from config: 2s; 0 deregisters at once)")
	bindKey(f, "weight", "discovery.weight")
	bindKey(f, "zone", "discovery.zone")
	bindKey(f, "drain-wait", "discovery.drain_wait")
}

// apply sets the flags given on cmd over the file and the environment.
func (t *trafficFlags) apply(cmd *cobra.Command, c *config.Config) {
	f := cmd.Flags()
	if f.Changed("weight") {
		c.Discovery.Weight = t.weight
	}
	if f.Changed("zone") {
		c.Discovery.Zone = t.zone
	}
	if f.Changed("drain-wait") {
		c.Discovery.DrainWait = t.drainWait
	}
}

// drainWait is the BootstrapOptions.DrainWait of c's discovery.drain_wait:
// zero there means no drain, which Bootstrap spells negative.
func drainWait(c config.Config) time.Duration {
	if c.Discovery.DrainWait == 0 {
		return -1
	}
	return c.Discovery.DrainWait
}

// drainThenStop returns a context that ends after ctx does and the
// registration has drained for its drain wait (Registration.DrainAndWait;
// at once when the wait is 0 or the drain fails): what a server should
// run under, so that it keeps answering while callers see the drain and
// move away.
func drainThenStop(ctx context.Context, g *globals, reg *switchboard.Registration) context.Context {
	serving, stop := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer stop()
		<-ctx.Done()
		if err := reg.DrainAndWait(); err != nil {
			g.log.Warn("draining before stopping failed; stopping now", "id", reg.ID(), "err", err)
		}
	}()
	return serving
}
