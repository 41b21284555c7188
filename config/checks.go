package config

import "github.com/switchboard-io/switchboard/checks"

// Checks is the [checks] section: the active health checks `switchboard
// serve` runs for instances registered with a check (see docs/checks.md).
// Several servers on one catalog share the checks out, each run by one
// server at a time.
type Checks struct {
	// Run makes the server run checks (default true); false leaves them
	// to the other servers on the catalog, or to none.
	Run bool `toml:"run"`
	// Allow lists, comma-separated, what a check may target beyond the
	// host of its own instance's address: CIDRs (10.0.0.0/8), IP
	// addresses and host names (.example.com for every name under
	// example.com). Empty (the default): only the instance's own host.
	// A registration whose check targets anything else is refused.
	Allow string `toml:"allow"`
}

// validate checks [checks] allow.
func (c Checks) validate() error {
	_, err := checks.ParsePolicy("checks.allow", c.Allow)
	return err
}

// Policy is the policy [checks] allow sets (the empty policy when it does
// not parse, which Load refuses).
func (c Checks) Policy() checks.Policy {
	p, _ := checks.ParsePolicy("checks.allow", c.Allow)
	return p
}
