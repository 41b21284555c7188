// Command switchboard is the operator's tool for a Switchboard catalog:
// register an instance and keep it alive, list and watch instances,
// deregister, reap, and a self-contained demo on the embedded default.
//
// Exit codes: 0 success, 1 failure, 2 invalid input (one line on stderr that
// names the field).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	_ "github.com/switchboard-io/switchboard/postgres"
	_ "github.com/switchboard-io/switchboard/remote"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks input the user must fix: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usage(err error) error { return usageError{err} }

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "switchboard: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, switchboard.ErrInvalid) {
		return 2
	}
	return 1
}

// globals are the flags every command takes.
type globals struct {
	dsn      string
	file     string
	logLevel string
	stdout   io.Writer
	stderr   io.Writer
	log      *slog.Logger
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "switchboard",
		Short:         "Service discovery and module routing",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
				return usage(fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel))
			}
			g.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
			slog.SetDefault(g.log)
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	pf := root.PersistentFlags()
	pf.StringVar(&g.dsn, "dsn", "", "catalog DSN: sqlite://PATH, sqlite::memory:, postgres://… (default from config: "+switchboard.DefaultDSN+")")
	pf.StringVar(&g.file, "config", "", "config file (default ./"+config.DefaultFile+" when present)")
	pf.StringVar(&g.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	root.AddCommand(
		newRegisterCmd(g), newLsCmd(g), newWatchCmd(g), newDeregisterCmd(g),
		newReapCmd(g), newLeasesCmd(g), newEchoCmd(g), newSendCmd(g), newVersionCmd(g), newDemoCmd(g), newServeCmd(g),
		newNatsCmd(g),
	)
	return root
}

// config loads the configuration with --dsn and the command's own flags
// applied on top, before validation.
func (g *globals) config(flags ...func(*config.Config)) (config.Config, error) {
	c, err := config.Load(g.file, nil, append([]func(*config.Config){func(c *config.Config) {
		if g.dsn != "" {
			c.Discovery.DSN = g.dsn
		}
	}}, flags...)...)
	if err != nil {
		return config.Config{}, usage(err)
	}
	return c, nil
}

// catalog loads the configuration and opens its catalog (see open).
func (g *globals) catalog(ctx context.Context, standalone bool) (config.Config, switchboard.Catalog, error) {
	c, err := g.config()
	if err != nil {
		return config.Config{}, nil, err
	}
	cat, err := g.open(ctx, c, standalone)
	return c, cat, err
}

// open opens the configured catalog. Standalone commands run in their own
// process, so they refuse sqlite::memory:, which no other process can see.
func (g *globals) open(ctx context.Context, c config.Config, standalone bool) (switchboard.Catalog, error) {
	d, err := switchboard.ParseDSN(c.Discovery.DSN)
	if err != nil {
		return nil, usage(err)
	}
	if standalone && d.Memory {
		return nil, usage(&switchboard.FieldError{Field: "dsn", Value: d.Raw,
			Reason: "an in-memory catalog lives in one process; use sqlite://PATH or postgres://… (only `demo` runs in one process)"})
	}
	opts := c.Options()
	opts.Logger = g.log
	cat, err := switchboard.Open(ctx, c.Discovery.DSN, opts)
	if err != nil {
		if errors.Is(err, switchboard.ErrInvalid) || errors.Is(err, switchboard.ErrUnknownBackend) {
			return nil, usage(err)
		}
		return nil, err
	}
	return cat, nil
}
