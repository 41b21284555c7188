package main

import (
	"context"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/remote"
)

// openDSN opens the configured catalog. A server DSN (http://, https://)
// is opened with the configuration's API token: SWITCHBOARD_HTTP_TOKEN, else
// [http] token — the setting `serve` requires, so one switchboard.toml
// serves the server and its clients (switchboard.Open alone reads only the
// environment variable). Extra CA certificates come from
// SWITCHBOARD_HTTP_CA, as with switchboard.Open.
func openDSN(ctx context.Context, c config.Config, opts switchboard.Options) (switchboard.Catalog, error) {
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
	cl, err := remote.Open(ctx, d.Raw, cfg)
	if err != nil {
		return nil, err // not a nil *remote.Client in a non-nil Catalog
	}
	return cl, nil
}
