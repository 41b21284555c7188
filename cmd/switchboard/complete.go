package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
)

// completionTimeout bounds the catalog read behind one shell completion: a
// slow or unreachable catalog must not freeze the user's shell.
const completionTimeout = 2 * time.Second

// registerCompletions completes flag values and arguments: ids, names,
// types and capabilities from the catalog (when it can be read cheaply: an
// existing SQLite file or a reachable server; nothing is ever created), the
// well-known types and capabilities, and fixed value lists.
func registerCompletions(root *cobra.Command, g *globals) {
	root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions(
		[]cobra.Completion{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	for _, c := range root.Commands() {
		switch c.Name() {
		case "deregister":
			c.ValidArgsFunction = g.completeIDs
		case "ls", "watch", "register", "echo":
			for flag, fn := range map[string]cobra.CompletionFunc{
				"name": g.completeField(func(in switchboard.Instance) []string { return []string{in.Name} }, nil),
				"type": g.completeField(func(in switchboard.Instance) []string { return []string{in.Type} }, wellKnownTypes),
				"capability": g.completeField(func(in switchboard.Instance) []string { return in.Capabilities },
					wellKnownCapabilities),
			} {
				if c.Flags().Lookup(flag) != nil {
					c.RegisterFlagCompletionFunc(flag, fn)
				}
			}
		}
	}
}

var (
	wellKnownTypes = []string{switchboard.TypeAcceptor, switchboard.TypeWriter, switchboard.TypeRouter,
		switchboard.TypeQuerier, switchboard.TypeCompactor}
	wellKnownCapabilities = []string{switchboard.CapTraceIngestion, switchboard.CapStorage, switchboard.CapRouting,
		switchboard.CapQueryExecution, switchboard.CapStorageMaintenance, switchboard.CapKafkaIngestion}
)

// completionInstances lists every instance (stale ones too) for a
// completion, or nothing when the catalog cannot be read cheaply.
func (g *globals) completionInstances(cmd *cobra.Command) []switchboard.Instance {
	c, err := g.readConfig()
	if err != nil {
		return nil
	}
	d, err := switchboard.ParseDSN(c.Discovery.DSN)
	if err != nil || d.Memory {
		return nil
	}
	if d.Scheme == "sqlite" {
		if _, err := os.Stat(d.Path); err != nil {
			return nil // completing must not create a catalog
		}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	opts := c.Options()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cat, err := openDSN(ctx, c, opts)
	if err != nil {
		return nil
	}
	defer cat.Close()
	list, err := cat.List(ctx, switchboard.Query{All: true})
	if err != nil {
		return nil
	}
	return list
}

// completeField completes the values of one instance field seen in the
// catalog (with how many instances have each), plus the well-known ones.
func (g *globals) completeField(values func(switchboard.Instance) []string, wellKnown []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		count := map[string]int{}
		for _, v := range wellKnown {
			count[v] += 0
		}
		for _, in := range g.completionInstances(cmd) {
			for _, v := range values(in) {
				count[v]++
			}
		}
		var out []cobra.Completion
		for _, v := range slices.Sorted(maps.Keys(count)) {
			if !strings.HasPrefix(v, toComplete) {
				continue
			}
			desc := "well-known"
			if n := count[v]; n == 1 {
				desc = "1 instance"
			} else if n > 1 {
				desc = strconv.Itoa(n) + " instances"
			}
			out = append(out, cobra.CompletionWithDesc(v, desc))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeIDs completes instance ids, described by name, type and address.
func (g *globals) completeIDs(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	list := g.completionInstances(cmd)
	sortInstances(list)
	for _, in := range list {
		if strings.HasPrefix(in.ID, toComplete) {
			out = append(out, cobra.CompletionWithDesc(in.ID, in.Name+" "+in.Type+" "+in.Address))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
