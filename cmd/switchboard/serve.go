package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/dashboard"
	"github.com/switchboard-io/switchboard/httpapi"
)

func newServeCmd(g *globals) *cobra.Command {
	var listen, token, tokenFile, tokensFile, adminTokenFile, allowedHosts, cert, key, natsListen string
	var demo, runChecks bool
	var dnsListen, dnsDomain, checksAllow string
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--token-file F] [--tokens-file F] [--admin-token-file F] [--tls-cert F --tls-key F] [--dns ADDR] [--demo]",
		Short: "Serve the catalog over HTTP: JSON API, SSE watch, metrics, health (clients use --dsn http://ADDR)",
		Long: `Serve the configured catalog over HTTP until Ctrl-C: the JSON API under /v1/, the SSE watch, the
dashboard, Prometheus metrics and health. Clients (any CLI command, or the Go library) reach it
with --dsn http://ADDR. The server is stateless over its database: several servers may share one
PostgreSQL. sqlite::memory: is accepted (the server is then the only process that sees it).

Clients send the token (http.token; --token-file keeps it out of the process list); the admin
token (http.admin_token, --admin-token-file) alone reaps live rows, deletes another client's
row and releases another's lease. --tokens-file (http.tokens_file) holds more client tokens, one a
line: give each client or tenant its own, and the per-token quotas ([http]
max_instances_per_token, max_leases_per_token, max_watchers_per_token) bound each. Without any
token the server answers only IP addresses, localhost and --allowed-hosts (its per-token quotas
then count each client address), and warns at start when it listens beyond loopback.

With --dns ADDR it also answers DNS over UDP and TCP from its cache of the catalog: A, AAAA
and SRV of NAME.service.switchboard, CAPABILITY.cap.switchboard, TYPE.type.switchboard and
ID.instance.switchboard (--dns-domain changes the domain; [dns] ttl and max_records tune the
answers).

It runs the active health checks of instances registered with one (http, https, tcp, grpc;
docs/checks.md): several servers on one catalog share them out, each check run by one server at
a time. --checks=false leaves them to the other servers. A check may target only its instance's
own host unless --checks-allow lists more.`,
		Example: `  switchboard serve
  switchboard --dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' serve --listen :8080 --token-file /run/secrets/sb-token --admin-token-file /run/secrets/sb-admin
  switchboard --dsn http://127.0.0.1:8080 ls
  switchboard serve --dns 127.0.0.1:8600   # then: dig @127.0.0.1 -p 8600 api.service.switchboard`,
		Annotations: map[string]string{
			annEnv: envDSNHelp + "\nSWITCHBOARD_HTTP_LISTEN  address to listen on (--listen wins)\nSWITCHBOARD_HTTP_TOKEN  API token (--token wins)\n" +
				"SWITCHBOARD_HTTP_TOKEN_FILE, SWITCHBOARD_HTTP_ADMIN_TOKEN_FILE  files holding the API and admin tokens (--token-file, --admin-token-file win)\n" +
				"SWITCHBOARD_HTTP_TOKENS_FILE  file holding more client tokens, one a line (--tokens-file wins)\n" +
				"SWITCHBOARD_HTTP_MAX_INSTANCES_PER_TOKEN, SWITCHBOARD_HTTP_MAX_LEASES_PER_TOKEN, SWITCHBOARD_HTTP_MAX_WATCHERS_PER_TOKEN  quotas of one client token (or address)\n" +
				"SWITCHBOARD_HTTP_ADMIN_TOKEN  admin token\nSWITCHBOARD_HTTP_ALLOWED_HOSTS  host names answered without a token (--allowed-hosts wins)\n" +
				"SWITCHBOARD_HTTP_TLS_CERT, SWITCHBOARD_HTTP_TLS_KEY  HTTPS certificate and key (--tls-cert, --tls-key win)\n" +
				"SWITCHBOARD_DNS_LISTEN, SWITCHBOARD_DNS_DOMAIN  DNS interface address and domain (--dns, --dns-domain win)\n" +
				"SWITCHBOARD_CHECKS_RUN, SWITCHBOARD_CHECKS_ALLOW  run checks; what they may target (--checks, --checks-allow win)",
			annExit: exitLong,
		},
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			fl := cmd.Flags()
			c, err := g.serverConfig(func(c *config.Config) {
				if fl.Changed("listen") {
					c.HTTP.Listen = listen
				}
				if fl.Changed("token") {
					c.HTTP.Token = token
				}
				if fl.Changed("token-file") {
					c.HTTP.TokenFile = tokenFile
				}
				if fl.Changed("tokens-file") {
					c.HTTP.TokensFile = tokensFile
				}
				if fl.Changed("admin-token-file") {
					c.HTTP.AdminTokenFile = adminTokenFile
				}
				if fl.Changed("allowed-hosts") {
					c.HTTP.AllowedHosts = allowedHosts
				}
				if fl.Changed("tls-cert") {
					c.HTTP.TLSCert = cert
				}
				if fl.Changed("tls-key") {
					c.HTTP.TLSKey = key
				}
				if fl.Changed("dns") {
					c.DNS.Listen = dnsListen
				}
				if fl.Changed("dns-domain") {
					c.DNS.Domain = dnsDomain
				}
				if fl.Changed("checks") {
					c.Checks.Run = runChecks
				}
				if fl.Changed("checks-allow") {
					c.Checks.Allow = checksAllow
				}
			})
			if err != nil {
				return err
			}
			// Errors about a setting name it as the user set it: the
			// flag, the environment variable or the config file's key.
			d, err := switchboard.ParseDSN(c.Discovery.DSN)
			if err != nil {
				return usage(g.nameSource(c, err))
			}
			if d.Scheme == "http" || d.Scheme == "https" {
				return usage(g.nameSource(c, &switchboard.FieldError{Field: "dsn", Value: d.Raw,
					Reason: "serve needs a database backend (sqlite://…, postgres://…), not another server"}))
			}
			var tlsCfg *tls.Config
			if c.HTTP.TLSCert != "" {
				pair, err := loadKeyPair(tlsFile{"http.tls_cert", c.HTTP.TLSCert}, tlsFile{"http.tls_key", c.HTTP.TLSKey})
				if err != nil {
					return usage(g.nameSource(c, err))
				}
				// h2 first: a browser opens at most six HTTP/1.1 connections to
				// a host, and each SSE stream holds one.
				tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"},
					CipherSuites: aeadSuites}
			}
			// The server is the only process that needs to see an in-memory
			// catalog, so serve accepts sqlite::memory:.
			cat, err := g.open(ctx, c, false)
			if err != nil {
				return err
			}
			defer cat.Close()
			ln, err := net.Listen("tcp", c.HTTP.Listen)
			if err != nil {
				return fmt.Errorf("listen %s: %w", c.HTTP.Listen, err)
			}
			if tlsCfg != nil {
				ln = tls.NewListener(ln, tlsCfg)
			}
			if natsListen != "" {
				stopNATS, err := serveNATS(ctx, g, c, cat, natsListen, demo)
				if err != nil {
					ln.Close()
					return err
				}
				defer stopNATS()
			}
			return runServe(ctx, g, cat, ln, c, tlsCfg != nil, demo)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", config.DefaultListen, "address to listen on ([http] listen)")
	f.StringVar(&token, "token", "", "API token required as Authorization: Bearer … ([http] token, SWITCHBOARD_HTTP_TOKEN); visible in the process list: prefer --token-file")
	f.StringVar(&tokenFile, "token-file", "", "file whose first line is the API token ([http] token_file)")
	f.StringVar(&tokensFile, "tokens-file", "", "file holding more client tokens, one a line, each a credential of its own for the per-token quotas ([http] tokens_file)")
	f.StringVar(&adminTokenFile, "admin-token-file", "", "file whose first line is the admin token ([http] admin_token_file)")
	f.StringVar(&allowedHosts, "allowed-hosts", "", "host names, comma-separated, answered without a token besides IP addresses and localhost ([http] allowed_hosts)")
	f.StringVar(&cert, "tls-cert", "", "TLS certificate PEM file ([http] tls_cert)")
	f.StringVar(&key, "tls-key", "", "TLS key PEM file ([http] tls_key)")
	bindKey(f, "listen", "http.listen")
	bindKey(f, "token", "http.token")
	bindKey(f, "token-file", "http.token_file")
	bindKey(f, "tokens-file", "http.tokens_file")
	bindKey(f, "admin-token-file", "http.admin_token_file")
	bindKey(f, "allowed-hosts", "http.allowed_hosts")
	bindKey(f, "tls-cert", "http.tls_cert")
	bindKey(f, "tls-key", "http.tls_key")
	f.StringVar(&natsListen, "nats", "", "also run an embedded NATS broker (JetStream, store in the data directory) on ADDR: --nats or --nats=127.0.0.1:4222")
	f.Lookup("nats").NoOptDefVal = "127.0.0.1:4222"
	f.StringVar(&dnsListen, "dns", "", "also answer DNS on ADDR, UDP and TCP, from the catalog: dig @127.0.0.1 -p 8600 NAME.service.switchboard ([dns] listen)")
	f.StringVar(&dnsDomain, "dns-domain", config.DefaultDNSDomain, "the domain DNS answers ([dns] domain)")
	bindKey(f, "dns", "dns.listen")
	bindKey(f, "dns-domain", "dns.domain")
	f.BoolVar(&runChecks, "checks", true, "run the active health checks of instances registered with one, shared with the other servers on the catalog (--checks=false: leave them to the others) ([checks] run)")
	f.StringVar(&checksAllow, "checks-allow", "", "CIDRs, IP addresses and host names, comma-separated, that checks may target beyond their instance's own host ([checks] allow)")
	bindKey(f, "checks", "checks.run")
	bindKey(f, "checks-allow", "checks.allow")
	f.BoolVar(&demo, "demo", false, "also run five demo services (the roles of a small tracing system) as registrations that come and go (all deregistered when the server stops, crashed ones included)")
	return cmd
}

func runServe(ctx context.Context, g *globals, cat switchboard.Catalog, ln net.Listener, c config.Config, secure, demo bool) error {
	api := httpapi.New(cat, httpapi.Options{Token: c.HTTP.Token, Tokens: c.HTTP.ClientTokens(), AdminToken: c.HTTP.AdminToken, AllowedHosts: c.HTTP.Hosts(),
		MaxLeaseTTL: c.HTTP.MaxLeaseTTL, MaxInstances: c.HTTP.MaxInstances, MaxInstanceBytes: int64(c.HTTP.MaxInstancesMiB) << 20,
		MaxLeases: c.HTTP.MaxLeases, MaxWatchers: c.HTTP.MaxWatchers,
		MaxInstancesPerToken: c.HTTP.MaxInstancesPerToken, MaxLeasesPerToken: c.HTTP.MaxLeasesPerToken, MaxWatchersPerToken: c.HTTP.MaxWatchersPerToken,
		DSN: c.Discovery.DSN, Version: appVersion(), Logger: g.log, UI: dashboard.Handler(), CheckPolicy: c.Checks.Policy().Check})
	var handler http.Handler = api
	if c.DNS.Listen != "" {
		stopDNS, withMetrics, err := serveDNS(ctx, g, c, cat)
		if err != nil {
			api.Close()
			ln.Close()
			return err
		}
		defer stopDNS()
		handler = withMetrics(api)
	}
	if c.Checks.Run {
		stopChecks, withMetrics := serveChecks(ctx, g, c, cat)
		defer stopChecks()
		handler = withMetrics(handler)
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	scheme := "http"
	if secure {
		scheme = "https"
	}
	if c.HTTP.Token == "" && len(c.HTTP.ClientTokens()) == 0 && c.HTTP.AdminToken == "" && !loopbackOnly(ln.Addr()) {
		warnOpen(g, ln.Addr())
	}
	fmt.Fprintf(g.stdout, "switchboard serve: listening on %s://%s (catalog %s)\n", scheme, ln.Addr(), switchboard.RedactDSN(c.Discovery.DSN))
	fmt.Fprintf(g.stdout, "switchboard serve: dashboard at %s://%s/\n", scheme, ln.Addr())
	g.log.Info("serve: listening", "url", scheme+"://"+ln.Addr().String(), "catalog", switchboard.RedactDSN(c.Discovery.DSN), "transport", "HTTP API, SSE watch")
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	// The demo stops with the server, however the server stops (the
	// listener may fail while ctx goes on).
	demoCtx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	var wg sync.WaitGroup
	if demo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runServeDemo(demoCtx, g, cat, c.Discovery.TTL, c.Discovery.HeartbeatInterval)
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	// The demo's roles deregister first, while watchers are still
	// connected to see them go.
	stopDemo()
	wg.Wait()
	// Close the API first: it ends the SSE streams, which Shutdown would
	// otherwise wait for.
	api.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// runServeDemo keeps the demo's five roles coming and going until
// ctx ends: each registers, heartbeats for a while, then leaves
// (deregisters) or, one time in three, crashes (stops heartbeating, so it
// expires after its TTL), and comes back a few seconds later. When ctx ends
// every role deregisters, whatever state it is in (a crashed one included:
// a stopped server leaves no demo row behind), before runServeDemo returns.
func runServeDemo(ctx context.Context, g *globals, cat switchboard.Catalog, ttl, hb time.Duration) {
	var wg sync.WaitGroup
	for i, r := range demoRoles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := switchboard.Instance{ID: "demo-" + r.typ, Name: "demo-" + r.typ, Type: r.typ, Address: r.addr,
				Capabilities: r.caps, Version: moduleVersion(), TTL: ttl, Metadata: map[string]string{"demo": "true"}}
			sleep := func(d time.Duration) bool {
				select {
				case <-ctx.Done():
					return false
				case <-time.After(d):
					return true
				}
			}
			if !sleep(time.Duration(i) * 300 * time.Millisecond) {
				return
			}
			// From the first registration on, the role's row goes when the
			// demo stops: heartbeating, crashed (its row expired but not
			// reaped) or gone (not found, which is fine). A Register cut
			// short by ctx may have written the row too.
			defer func() {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := cat.Deregister(dctx, in.ID); err != nil && !errors.Is(err, switchboard.ErrNotFound) {
					g.log.Warn("demo: deregistering at shutdown failed", "role", r.typ, "id", in.ID, "err", err)
				}
			}()
			for {
				if _, err := cat.Register(ctx, in); err != nil {
					if ctx.Err() != nil {
						return
					}
					g.log.Warn("demo: register failed", "role", r.typ, "err", err)
				}
				life := time.After(ttl + rand.N(4*ttl))
			beat:
				for {
					select {
					case <-ctx.Done():
						return
					case <-life:
						break beat
					case <-time.After(hb):
						cat.Heartbeat(ctx, in.ID)
					}
				}
				if rand.N(3) != 0 {
					cat.Deregister(ctx, in.ID)
				}
				if !sleep(2*time.Second + rand.N(2*ttl)) {
					return
				}
			}
		}()
	}
	wg.Wait()
}
