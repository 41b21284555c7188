// Command switchboard is the operator's tool for a Switchboard catalog:
// register an instance and keep it alive, list and watch instances,
// deregister, reap, and a self-contained demo on the embedded default.
//
// Exit codes: 0 success, 1 failure, 2 invalid input (one line on stderr that
// names the flag and ends with the command's --help), 130/143 when a second
// interrupt forced the exit before clean-up.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	_ "github.com/switchboard-io/switchboard/postgres"
	_ "github.com/switchboard-io/switchboard/remote"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go interrupts(sigs, cancel, os.Stderr, isTerminal(os.Stderr), os.Exit)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(code)
}

// interrupts cancels the command at the first signal, so it shuts down
// gracefully (a registration deregisters), and exits at once at the second:
// a clean-up stuck behind a locked or unreachable catalog must never hold the
// user hostage. On a terminal a slow shutdown says how to force it.
func interrupts(sigs <-chan os.Signal, cancel func(), stderr io.Writer, terminal bool, exit func(int)) {
	<-sigs
	cancel()
	select {
	case sig := <-sigs:
		forceExit(sig, stderr, exit)
		return
	case <-time.After(time.Second):
	}
	if terminal {
		fmt.Fprintln(stderr, "switchboard: shutting down (deregistering, closing the catalog); press Ctrl-C again to exit at once")
	}
	forceExit(<-sigs, stderr, exit)
}

func forceExit(sig os.Signal, stderr io.Writer, exit func(int)) {
	fmt.Fprintf(stderr, "switchboard: second %s: exiting without clean-up\n", sig)
	code := 130 // 128 + SIGINT
	if sig == syscall.SIGTERM {
		code = 143
	}
	exit(code)
}

// usageError marks input the user must fix: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usage(err error) error { return usageError{err} }

// usagef is usage(fmt.Errorf(…)).
func usagef(format string, a ...any) error { return usage(fmt.Errorf(format, a...)) }

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root, g := newRootGlobals(stdout, stderr)
	return execute(ctx, root, g, args)
}

// execute runs args on root, whose globals are g (newRootGlobals), and
// returns the exit code.
func execute(ctx context.Context, root *cobra.Command, g *globals, args []string) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	msg := oneLine(err.Error())
	var ue usageError
	// Anything that fails before a command's own code runs (flags,
	// arguments, unknown commands, cobra's required flags) is a usage error.
	if !g.running || errors.As(err, &ue) || errors.Is(err, switchboard.ErrInvalid) {
		fmt.Fprintf(g.stderr, "switchboard: %s; run '%s --help'\n", msg, cmd.CommandPath())
		return 2
	}
	fmt.Fprintf(g.stderr, "switchboard: %s\n", msg)
	return 1
}

// oneLine folds a multi-line message (cobra's suggestions, wrapped driver
// errors) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// globals are the flags every command takes.
type globals struct {
	dsn      string
	file     string
	logLevel string
	stdout   io.Writer
	stderr   io.Writer
	log      *slog.Logger
	// running is set once a command's own code starts: errors before that
	// are usage errors.
	running bool
	// terminal reports whether w is a terminal (replaced in tests).
	terminal func(w io.Writer) bool
	// opened, when set (by a test, between newRootGlobals and execute), is
	// handed every catalog the command opens.
	opened func(switchboard.Catalog)
	// cmd is the command being run (for naming the flags the user typed).
	cmd *cobra.Command
	// getenv is the environment the configuration is loaded from (nil:
	// os.Getenv; tests inject one).
	getenv func(string) string
	// secret is --secret of the commands that name one instance (see
	// instanceSecret).
	secret string
	// requestTimeout is --request-timeout, applied when the user typed
	// it (see addRemoteFlags).
	requestTimeout time.Duration
	// configLoaded, when set (by a test, between newRootGlobals and
	// execute), is handed the configuration before and after --dsn and the
	// command's flags were applied; an error it returns replaces
	// config.Load's result, as an error of config.Load would.
	configLoaded func(before, after config.Config) error
}

// env reads the environment the configuration is loaded from.
func (g *globals) env(k string) string {
	if g.getenv == nil {
		return os.Getenv(k)
	}
	return g.getenv(k)
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root, _ := newRootGlobals(stdout, stderr)
	return root
}

func newRootGlobals(stdout, stderr io.Writer) (*cobra.Command, *globals) {
	g := &globals{stdout: stdout, stderr: stderr, terminal: isTerminal}
	root := &cobra.Command{
		Use:   "switchboard",
		Short: "Service discovery and module routing",
		Long: `switchboard registers services in a catalog, keeps them alive with heartbeats, lists and
watches them, and routes messages between modules by node name.

The catalog is chosen by --dsn (or SWITCHBOARD_DISCOVERY_DSN, or switchboard.toml):
an embedded SQLite file by default (` + switchboard.DefaultDSN + `), or PostgreSQL
when several hosts share one catalog.`,
		Example: `  switchboard register --name querier --type querier --address 127.0.0.1:50054
  switchboard ls -o wide
  switchboard watch --capability storage
  switchboard --dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' ls
  source <(switchboard completion bash)`,
		Version:       appVersion(),
		Args:          rootArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// Commands that run until stopped say at info what they run
			// (catalog, address, wire); one-shot commands stay quiet.
			lvl := slog.LevelWarn
			if cmd.Annotations[annDaemon] != "" {
				lvl = slog.LevelInfo
			}
			if fl := cmd.Flag("log-level"); fl != nil && fl.Changed {
				if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
					return usagef("--log-level %q: want debug, info, warn or error", g.logLevel)
				}
			}
			g.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
			slog.SetDefault(g.log)
			g.cmd = cmd
			return nil
		},
	}
	root.SuggestionsMinimumDistance = 2
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	root.SetVersionTemplate("{{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&g.dsn, "dsn", "", "catalog DSN: sqlite://PATH, sqlite::memory:, postgres://… (default from config: "+switchboard.DefaultDSN+")")
	bindKey(pf, "dsn", "discovery.dsn")
	g.addRemoteFlags(pf)
	pf.StringVar(&g.file, "config", "", "config file (default ./"+config.DefaultFile+" when present)")
	pf.StringVar(&g.logLevel, "log-level", "", "log level: debug, info, warn, error (default info for serve, echo and nats, which run until stopped; warn for the others)")
	root.AddCommand(
		newRegisterCmd(g), newLsCmd(g), newWatchCmd(g), newDeregisterCmd(g), newDrainCmd(g),
		newReapCmd(g), newLeasesCmd(g), newEchoCmd(g), newSendCmd(g), newVersionCmd(g), newDemoCmd(g), newServeCmd(g), newBackupCmd(g),
		newNatsCmd(g),
	)
	for _, c := range root.Commands() {
		switch c.Name() {
		case "serve", "echo", "nats":
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[annDaemon] = "true"
		}
	}
	finish(root, g)
	return root, g
}

// annDaemon marks a command that runs until stopped: it logs at info by
// default.
const annDaemon = "switchboard/daemon"

// finish applies the conventions every command follows, including
// commands added by other files: errors before a command's own code runs are
// usage errors, help lists the environment and exit codes, and `help` with an
// unknown topic is an error.
func finish(root *cobra.Command, g *globals) {
	root.SetHelpCommand(newHelpCmd())
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil && c != root {
		c.Example = `  source <(switchboard completion bash)               # this shell
  switchboard completion bash > /etc/bash_completion.d/switchboard
  switchboard completion zsh > "${fpath[1]}/_switchboard"
  switchboard completion fish > ~/.config/fish/completions/switchboard.fish`
		c.Long += "\n\nBesides commands and flags, the scripts complete instance ids (deregister), names, types and\n" +
			"capabilities (ls, watch, register, echo) from the configured catalog when it can be read within\n" +
			"2 s; a SQLite catalog that does not exist is not created."
		c.Annotations = map[string]string{annEnv: envDSNHelp + " (read when completing ids, names, types, capabilities)"}
	}
	root.SetUsageTemplate(usageTemplate)
	registerCompletions(root, g)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.RunE != nil {
			runE := c.RunE
			c.RunE = func(cmd *cobra.Command, args []string) error {
				g.running = true
				return runE(cmd, args)
			}
		} else if c.Run != nil {
			run := c.Run
			c.Run = func(cmd *cobra.Command, args []string) {
				g.running = true
				run(cmd, args)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// config loads the configuration with --dsn and the command's own flags
// applied on top, before validation. When no heartbeat interval is given
// anywhere, it is derived from the TTL (see deriveHeartbeat), so --ttl 2s
// alone works.
func (g *globals) config(flags ...func(*config.Config)) (config.Config, error) {
	return g.load(g.env, nil, flags, g.deriveHeartbeat)
}

// clientOnly are the keys only a client of a switchboard server uses:
// [http] request_timeout bounds its requests. The commands that are no
// such client (serve, nats) load without them (config.LoadExcept), so a
// wrong one cannot make them fail, while every other command still
// refuses it.
var clientOnly = []string{"http.request_timeout"}

// serverConfig is config for serve, which serves a catalog and is no
// client of a server (clientOnly).
func (g *globals) serverConfig(flags ...func(*config.Config)) (config.Config, error) {
	return g.load(g.env, clientOnly, flags, g.deriveHeartbeat)
}

// readConfig loads the configuration for a command that does not
// heartbeat: the heartbeat interval's environment variable, however wrong,
// cannot make it fail.
func (g *globals) readConfig(flags ...func(*config.Config)) (config.Config, error) {
	return g.readConfigExcept(nil, flags...)
}

// brokerConfig is readConfig for nats, which runs a broker and is no
// client of a catalog server (clientOnly).
func (g *globals) brokerConfig() (config.Config, error) { return g.readConfigExcept(clientOnly) }

// readConfigExcept is readConfig without the keys in unused.
func (g *globals) readConfigExcept(unused []string, flags ...func(*config.Config)) (config.Config, error) {
	hide := func(k string) string {
		if k == envHeartbeat {
			return ""
		}
		return g.env(k)
	}
	return g.load(hide, unused, flags, func(_ func(string) string, c *config.Config) {
		c.Discovery.HeartbeatInterval = switchboard.HeartbeatFor(c.Discovery.TTL)
	})
}

// load loads the configuration from the environment getenv, less the keys
// the command does not use (unused: see config.LoadExcept), with --dsn,
// the remote flags (--request-timeout) and flags applied over it, then
// derive (which works out what the flags leave unset, reading the same
// getenv).
func (g *globals) load(getenv func(string) string, unused []string, flags []func(*config.Config), derive func(getenv func(string) string, c *config.Config)) (config.Config, error) {
	overrides := append([]func(*config.Config){func(c *config.Config) {
		if g.dsn != "" {
			c.Discovery.DSN = g.dsn
		}
		g.remoteFlags(c)
	}}, flags...)
	var before, after *config.Config
	if g.configLoaded != nil {
		overrides = append([]func(*config.Config){func(c *config.Config) { b := *c; before = &b }}, overrides...)
		overrides = append(overrides, func(c *config.Config) { a := *c; after = &a })
	}
	c, err := config.LoadExcept(unused, g.file, getenv, append(overrides, func(c *config.Config) { derive(getenv, c) })...)
	if g.configLoaded != nil && after != nil {
		if herr := g.configLoaded(*before, *after); herr != nil {
			c, err = config.Config{}, herr
		}
	}
	if err != nil {
		// A TTL too short for any heartbeat is the TTL's error
		// (switchboard.ValidateHeartbeat), named as the user set it:
		// config.Load names the environment, the file and the defaults,
		// and leaves a value a flag changed for nameSource to name.
		return config.Config{}, usage(g.nameSource(config.Config{}, err))
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

// readCatalog is catalog for commands that do not heartbeat (see readConfig).
func (g *globals) readCatalog(ctx context.Context) (config.Config, switchboard.Catalog, error) {
	c, err := g.readConfig()
	if err != nil {
		return config.Config{}, nil, err
	}
	cat, err := g.open(ctx, c, true)
	return c, cat, err
}

// open opens the configured catalog. Standalone commands run in their own
// process, so they refuse sqlite::memory:, which no other process can see.
func (g *globals) open(ctx context.Context, c config.Config, standalone bool) (switchboard.Catalog, error) {
	d, err := switchboard.ParseDSN(c.Discovery.DSN)
	if err != nil {
		return nil, usage(g.nameSource(c, err))
	}
	if standalone && d.Memory {
		return nil, usage(g.nameSource(c, &switchboard.FieldError{Field: "dsn", Value: d.Raw,
			Reason: "an in-memory catalog lives in one process; use sqlite://PATH or postgres://… (only `demo` runs in one process)"}))
	}
	opts := c.Options()
	opts.Logger = g.log
	secret := ""
	if g.cmd != nil && g.cmd.Flag("secret") != nil {
		if secret, err = g.instanceSecret(g.cmd, c); err != nil {
			return nil, err
		}
	}
	cat, err := openDSNWith(ctx, c, opts, secret)
	if err != nil {
		if errors.Is(err, switchboard.ErrInvalid) || errors.Is(err, switchboard.ErrUnknownBackend) {
			return nil, usage(g.nameSource(c, err))
		}
		return nil, err
	}
	if g.opened != nil {
		g.opened(cat)
	}
	return cat, nil
}
