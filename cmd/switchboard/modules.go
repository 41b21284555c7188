package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
)

func newEchoCmd(g *globals) *cobra.Command {
	var name, listen string
	var tf tlsFlags
	var nf natsFlags
	var trf trafficFlags
	cmd := &cobra.Command{
		Use:   "echo --name M [--listen 127.0.0.1:0] [--tls-cert F --tls-key F [--tls-ca F]]",
		Short: "Run module M: serve the ModuleService, register its address, answer every message with its payload",
		Long: `Run a module that answers every message with its payload: serve the gRPC ModuleService on
--listen, register the real address in the catalog (printed as one JSON line), heartbeat until
Ctrl-C, then deregister. 'switchboard send' reaches it by node name.

The name is sanitised as in register (stderr says so when that changes it). TTL and heartbeat
come from the configuration; with only a TTL set, the heartbeat is min(3s, ttl/3), at least 10ms.`,
		Example: `  switchboard echo --name echo
  switchboard echo --name echo --listen 127.0.0.1:7000`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("name") {
				return usagef("--name is required")
			}
			module, err := switchboard.SanitizeName(name)
			if err != nil {
				return usage(flagField(err, "--name"))
			}
			if _, _, err := net.SplitHostPort(listen); err != nil {
				return usage(&switchboard.FieldError{Field: "--listen", Value: listen, Reason: "want host:port, e.g. 127.0.0.1:0"})
			}
			noteSanitised(g, name, module)
			ctx := cmd.Context()
			c, err := g.config(tf.apply, nf.apply, func(c *config.Config) { trf.apply(cmd, c) })
			if err != nil {
				return err
			}
			tlsm, err := g.wireTLS(c)
			if err != nil {
				return err
			}
			if tlsm != nil && c.Transport.TLSCert == "" {
				// A CA alone: named as it was set (--tls-ca, the
				// environment or the file).
				return usage(g.nameSource(c, &switchboard.FieldError{Field: "transport.tls_ca", Value: c.Transport.TLSCA,
					Reason: "a TLS server needs its certificate too: --tls-cert and --tls-key (transport.tls_cert, tls_key)"}))
			}
			// Spans are exported when the OTEL_* environment says so.
			tr, flush, err := g.setupTracing(ctx, module, false)
			if err != nil {
				return err
			}
			defer flush()
			cat, err := g.open(ctx, c, true)
			if err != nil {
				return err
			}
			defer cat.Close()
			if handled, err := echoOverNATS(ctx, g, c, cat, module, tr.Provider()); handled {
				return err
			}
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("echo: listen on %s: %w", listen, err)
			}
			// Register only once the listener exists, so the catalog never
			// points at a port nobody serves.
			reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{Name: module, Type: pool.ModuleType,
				Address: lis.Addr().String(), Version: moduleVersion(), TTL: c.Discovery.TTL,
				Weight: c.Discovery.Weight, Zone: c.Discovery.Zone},
				switchboard.BootstrapOptions{HeartbeatInterval: c.Discovery.HeartbeatInterval, Logger: g.log, DrainWait: drainWait(c)})
			if err != nil {
				lis.Close()
				return err
			}
			defer reg.Close()
			line, err := json.Marshal(reg.Instance())
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s\n", line)
			g.log.Info("transport: gRPC", "module", module, "listen", lis.Addr().String(), "tls", tlsm != nil,
				"catalog", switchboard.RedactDSN(c.Discovery.DSN), "id", reg.Instance().ID)
			// On Ctrl-C the module drains first and keeps serving while
			// callers move away, then stops; Close then deregisters.
			serving := drainThenStop(ctx, g, reg)
			return grpcwire.ServeEcho(serving, lis, module, grpcwire.ServerOptions{Logger: g.log, TLS: tlsm, TracerProvider: tr.Provider()})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "module name (sanitised; required)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to serve gRPC on (port 0: any free port)")
	tf.add(cmd.Flags())
	nf.add(cmd.Flags())
	trf.flags(cmd.Flags())
	cmd.Annotations = map[string]string{
		annEnv:  strings.Join([]string{envDSNHelp, envTTLHelp, envHeartbeatHelp, envTLSHelp, envTrafficHelp}, "\n"),
		annExit: exitLong,
	}
	return cmd
}

// fromSignal is the sender of a message injected from outside a flow: the
// TinySystems SDK's runner uses an incoming payload only from "signal".
const fromSignal = "signal"

// portedNode parses a node name that must have a port (a sender or a
// receiver of send).
func portedNode(s string) (switchboard.NodeName, error) {
	n, err := switchboard.ParseNodeName(s)
	if err == nil {
		err = n.RequirePort()
	}
	return n, err
}

// validFrom checks send's --from: "signal" or a full node name with port.
func validFrom(from string) error {
	if from == fromSignal {
		return nil
	}
	if _, err := portedNode(from); err != nil {
		return &switchboard.FieldError{Field: "--from", Value: from, Reason: `must be "signal" or a node name <flow>.<module>.<node>:<port>`}
	}
	return nil
}

func newSendCmd(g *globals) *cobra.Command {
	var to, from, data string
	var attempts int
	var verbose bool
	var tf tlsFlags
	var nf natsFlags
	cmd := &cobra.Command{
		Use:   "send --to <flow>.<module>.<node>:<port> --data STRING [--from signal|<node>:<port>] [--edge-retry N] [--verbose] [--tls-ca F [--tls-cert F --tls-key F]]",
		Short: "Send one message through the router (the module found in the catalog) and print the reply",
		Long: `Send one message to a node of a module, found in the catalog by its name, over the gRPC pool,
and print the reply on stdout. A failure prints its code and whether it is retryable, and exits 1;
--edge-retry N retries a retryable failure up to N attempts in all (waiting 1 s, doubling).
The message comes from "signal" unless --from names a sending node: a TinySystems SDK node
uses an incoming payload only when the message comes from "signal" (from a node, it runs
with its edge's configuration instead).`,
		Example: `  switchboard send --to flow1.echo.node-a:in --data 'hello'
  switchboard send --to flow1.echo.node-a:in --data 'hello' --edge-retry 3
  switchboard send --to flow1.echo.node-a:in --data 'hello' --from flow1.tester.node-t:out`,
		Annotations: map[string]string{annEnv: envDSNHelp + "\n" + envTLSHelp},
		Args:        noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("to") {
				return usagef("--to is required")
			}
			target, err := portedNode(to)
			if err != nil {
				return usage(flagField(err, "--to"))
			}
			if err := validFrom(from); err != nil {
				return usage(err)
			}
			if attempts < 1 || attempts > router.MaxMaxAttempts {
				return usage(&switchboard.FieldError{Field: "--edge-retry", Value: fmt.Sprint(attempts), Reason: "must be from 1 to 10"})
			}
			policy := router.RetryPolicy{MaxAttempts: attempts}
			ctx := cmd.Context()
			c, err := g.readConfig(tf.apply, nf.apply)
			if err != nil {
				return err
			}
			tlsm, err := g.wireTLS(c)
			if err != nil {
				return err
			}
			// The tracing environment is input too: checked before the
			// catalog is opened (which may create a SQLite file).
			tr, flush, err := g.setupTracing(ctx, "switchboard-cli", verbose)
			if err != nil {
				return err
			}
			defer flush()
			cat, err := g.open(ctx, c, true)
			if err != nil {
				return err
			}
			defer cat.Close()
			msg := router.Message{From: from, To: to, Payload: []byte(data)}
			if handled, err := sendOverNATS(ctx, g, c, cat, msg, target, policy, tr, verbose); handled || err != nil {
				return err
			}
			return sendVia(ctx, g, msg, policy, tr, verbose, func(ctx context.Context, tp trace.TracerProvider) (router.Wire, func(), error) {
				// Follow only the target module: a one-shot send has no
				// reason to pre-warm connections to every address in the
				// catalog.
				p := pool.New(pool.Options{Logger: g.log, TLS: tlsm, TracerProvider: tp})
				p.Start(ctx)
				if err := p.Follow(ctx, cat, switchboard.Query{Name: target.Module, Type: pool.ModuleType}); err != nil {
					p.Close()
					return nil, nil, err
				}
				return p, func() { p.Close() }, nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "full node name with port: <flow>.<module>.<node>:<port>")
	f.StringVar(&data, "data", "", "payload")
	f.StringVar(&from, "from", fromSignal, `sender: "signal" (an injected message, whose payload an SDK node uses) or the full node name with port of a sending node`)
	f.IntVar(&attempts, "edge-retry", 1, "maxAttempts of the edge's retry policy (1–10; retries wait 1 s, doubling)")
	f.BoolVar(&verbose, "verbose", false, "print the message's trace id (trace_id <hex>) to stderr")
	tf.add(f)
	nf.add(f)
	return cmd
}
