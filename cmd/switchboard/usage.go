package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

// The environment variables of the configuration (config.Load reads them).
const (
	envDSN       = "SWITCHBOARD_DISCOVERY_DSN"
	envHeartbeat = "SWITCHBOARD_DISCOVERY_HEARTBEAT_INTERVAL"
	envTTL       = "SWITCHBOARD_DISCOVERY_TTL"
	envPoll      = "SWITCHBOARD_DISCOVERY_POLL_INTERVAL"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// noArgs rejects positional arguments with one line naming the first.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.Name(), args[0])
	}
	return nil
}

// oneArg requires exactly one positional argument, described by what.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usagef("%s: missing argument %s", cmd.Name(), what)
		case len(args) > 1:
			return usagef("%s takes one argument (%s), got %d: unexpected %q", cmd.Name(), what, len(args), args[1])
		}
		return nil
	}
}

// rootArgs makes an unknown command one line, with a suggestion when one is
// close.
func rootArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usage(errors.New(msg))
}

// newHelpCmd is `help [command]`; an unknown topic is a usage error, not
// the root's help with exit 0.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help prints the description, flags, examples, environment and exit codes of a command.",
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			target, rest, err := root.Find(args)
			if err != nil || len(args) > 0 && (target == root || len(rest) > 0) {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			target.InitDefaultHelpFlag() // as `CMD --help` shows it
			target.InitDefaultVersionFlag()
			return target.Help()
		},
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var out []cobra.Completion
			if len(args) == 0 {
				for _, sub := range c.Root().Commands() {
					if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
						out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
					}
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}
}

// Annotations a command sets for its help.
const (
	// annEnv lists the environment variables that apply, one per line
	// ("NAME  meaning"); by default the catalog's DSN.
	annEnv = "switchboard/env"
	// annExit lists the exit codes, one per line; by default 0, 1, 2.
	annExit = "switchboard/exit"
)

const (
	envDSNHelp  = envDSN + "  catalog DSN (--dsn wins)"
	envPollHelp = envPoll + "  safety-net resync period of watches"
	envTTLHelp  = envTTL + "  TTL of the registration (--ttl wins)"
	envTLSHelp  = "SWITCHBOARD_TRANSPORT_TLS_CERT, _KEY, _CA  TLS of the module wire (--tls-cert, --tls-key, --tls-ca win)\n" +
		"TINY_NATS_URL, TINY_NATS_TRANSPORT  the NATS module wire instead of gRPC (jetstream: the durable wire)\n" +
		"SWITCHBOARD_NATS_CREDS, _NKEY, _USER, _PASSWORD, _TOKEN, _TLS_CA, _TLS_CERT, _TLS_KEY, _TLS_FIRST, _STREAM_REPLICAS  NATS credentials, TLS and stream replicas (the --nats-* flags win)"
	envHeartbeatHelp = envHeartbeat + "  heartbeat interval, 10ms to ttl/2 (--heartbeat wins; default min(3s, ttl/3), at least 10ms)"

	exitDefault = "0  success\n1  failure (catalog unreachable, no such instance, …)\n2  invalid input: one line on stderr naming the flag"
	exitLong    = "0  stopped by Ctrl-C or SIGTERM after a clean shutdown\n1  failure (catalog unreachable, …)\n2  invalid input: one line on stderr naming the flag\n130/143  a second Ctrl-C/SIGTERM forced the exit before clean-up"
)

func helpEnv(c *cobra.Command) string {
	if v, ok := c.Annotations[annEnv]; ok {
		return v
	}
	return envDSNHelp
}

func helpExit(c *cobra.Command) string {
	if v, ok := c.Annotations[annExit]; ok {
		return v
	}
	return exitDefault
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func init() {
	cobra.AddTemplateFunc("helpEnv", func(c *cobra.Command) string { return indent(helpEnv(c)) })
	cobra.AddTemplateFunc("helpExit", func(c *cobra.Command) string { return indent(helpExit(c)) })
}

// usageTemplate is cobra's, plus the environment variables and exit codes
// of every command.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}

Environment:
{{helpEnv .}}

Exit codes:
{{helpExit .}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// flagOf maps a validation field of an instance (switchboard.Normalize's
// fields) to the flag that sets it. A flag that sets a key of the
// configuration says so itself (bindKey); nameSource finds it there.
var flagOf = map[string]string{
	"name": "name", "type": "type", "address": "address", "capability": "capability",
	"version": "version", "id": "id", "metadata": "meta", "components": "components",
}

// annKey is the annotation of a flag that sets a key of the configuration:
// the key ("http.tls_cert").
const annKey = "switchboard/config-key"

// bindKey records that the flag name of fs sets the configuration key (its
// command's config override copies the flag's value there), so that an
// error about the key's value names the flag when the user typed it. Every
// flag whose value reaches the configuration must be bound
// (TestConfigFlagsBound checks every command).
func bindKey(fs *pflag.FlagSet, name, key string) {
	if err := fs.SetAnnotation(name, annKey, []string{key}); err != nil {
		panic(fmt.Sprintf("bindKey %s: %v", name, err)) // a flag defined after its binding: a bug of this program
	}
}

// flagFor is the flag of the command being run, typed by the user, that
// set the validation field: a flag bound to the field's configuration key
// (config.KeyOf), else one flagOf names; "" when there is none.
func (g *globals) flagFor(field string) string {
	if g.cmd == nil {
		return ""
	}
	key, name := config.KeyOf(field), ""
	g.cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if k := fl.Annotations[annKey]; name == "" && fl.Changed && len(k) == 1 && k[0] == key {
			name = fl.Name
		}
	})
	if name != "" {
		return name
	}
	if f, ok := flagOf[field]; ok {
		if fl := g.cmd.Flag(f); fl != nil && fl.Changed {
			return f
		}
	}
	return ""
}

// nameSource rewrites the field of a validation error as the user set it:
// the flag they typed (--ttl), else, for a setting of the configuration c,
// where config.Load found it (c.NameSource: the environment variable, the
// config file and key, or the key marked "(default)"). Other errors are
// returned unchanged; so are errors about settings when c is the zero
// Config (config.Load's own errors name their source already).
func (g *globals) nameSource(c config.Config, err error) error {
	fe, ok := err.(*switchboard.FieldError)
	if !ok {
		return err // wrapped ones say where they come from already
	}
	field, rest, _ := strings.Cut(fe.Field, " ")
	if f := g.flagFor(field); f != "" {
		out := *fe // keeps the sentinel it wraps
		out.Field = strings.TrimSpace("--" + f + " " + rest)
		return &out
	}
	return c.NameSource(err)
}

// deriveHeartbeat replaces a heartbeat nobody set (no --heartbeat, no
// environment variable in getenv, the environment c was loaded from, and
// the default value) with switchboard.HeartbeatFor of the final TTL. A
// heartbeat of exactly 3s written in the config file cannot be told from the
// default: it is derived too when the TTL is under 9s.
func (g *globals) deriveHeartbeat(getenv func(string) string, c *config.Config) {
	if g.cmd != nil {
		if fl := g.cmd.Flag("heartbeat"); fl != nil && fl.Changed {
			return
		}
	}
	if getenv(envHeartbeat) != "" || c.Discovery.HeartbeatInterval != switchboard.DefaultHeartbeatInterval {
		return
	}
	c.Discovery.HeartbeatInterval = switchboard.HeartbeatFor(c.Discovery.TTL)
}
