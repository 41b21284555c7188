package main

import (
	"context"
	"net/http"

	"github.com/spf13/pflag"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/remote"
)

// addRemoteFlags adds the flags of a server DSN (http://, https://) to the
// flags every command takes: --request-timeout, [http] request_timeout.
func (g *globals) addRemoteFlags(pf *pflag.FlagSet) {
	pf.DurationVar(&g.requestTimeout, "request-timeout", 0,
		"with an http:// or https:// DSN, how long each request waits for the server's answer (positive; default from config: "+
			"http.request_timeout or SWITCHBOARD_HTTP_REQUEST_TIMEOUT, else "+config.DefaultRequestTimeout.String()+")")
	bindKey(pf, "request-timeout", "http.request_timeout")
}

// remoteFlags is a config override: the remote flags the user typed win
// over the file and the environment.
func (g *globals) remoteFlags(c *config.Config) {
	if g.cmd != nil && g.cmd.Flags().Changed("request-timeout") {
		c.HTTP.RequestTimeout = g.requestTimeout
	}
}

// openDSN opens the configured catalog. A server DSN (http://, https://)
// is opened with the configuration's API token: SWITCHBOARD_HTTP_TOKEN, else
// [http] token — the setting `serve` requires, so one switchboard.toml
// serves the server and its clients (switchboard.Open alone reads only the
// environment variable) — and its request timeout ([http] request_timeout,
// SWITCHBOARD_HTTP_REQUEST_TIMEOUT, --request-timeout; 30s by default).
// Extra CA certificates come from SWITCHBOARD_HTTP_CA, as with
// switchboard.Open.
func openDSN(ctx context.Context, c config.Config, opts switchboard.Options) (switchboard.Catalog, error) {
	return openDSNWith(ctx, c, opts, "")
}

// openDSNWith is openDSN; over a server DSN, secret (when not "") is sent
// as the instance secret of registrations, drains and deregistrations
// (see secretTransport).
func openDSNWith(ctx context.Context, c config.Config, opts switchboard.Options, secret string) (switchboard.Catalog, error) {
	d, err := switchboard.ParseDSN(c.Discovery.DSN)
	if err != nil || (d.Scheme != "http" && d.Scheme != "https") {
		return switchboard.Open(ctx, c.Discovery.DSN, opts)
	}
	cfg, err := remote.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	if cfg.Token == "" {
		cfg.Token = c.HTTP.Token
	}
	cfg.Logger = opts.Logger
	cfg.RequestTimeout = c.HTTP.RequestTimeout // 0 (a Config not loaded): remote's default
	if secret != "" {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS
		}
		cfg.HTTPClient = &http.Client{Transport: &secretTransport{base: tr, secret: secret}}
	}
	cl, err := remote.Open(ctx, d.Raw, cfg)
	if err != nil {
		return nil, err // not a nil *remote.Client in a non-nil Catalog
	}
	return cl, nil
}
