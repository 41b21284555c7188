package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/switchboard-io/switchboard"
)

// DNS is the [dns] section: the DNS interface of `switchboard serve`, which
// answers names such as api.service.switchboard. from the server's
// discovery cache. It is off unless listen is set.
type DNS struct {
	// Listen is the address the DNS interface answers on, over UDP and
	// TCP (such as 127.0.0.1:8600); empty (the default) turns it off.
	Listen string `toml:"listen"`
	// Domain is the zone answered (default "switchboard"): names under it
	// are answered, any other name is refused.
	Domain string `toml:"domain"`
	// TTL is the time to live of every record answered, in seconds, from
	// 0 to 604800 (a week); default 0: resolvers ask again each time, so a
	// change is seen at once.
	TTL int `toml:"ttl"`
	// MaxRecords is the most address or SRV records of one answer over
	// UDP (default 3); over TCP every record that fits is answered.
	MaxRecords int `toml:"max_records"`
}

// DefaultDNSDomain is the default [dns] domain.
const DefaultDNSDomain = "switchboard"

// DefaultDNSMaxRecords is the default [dns] max_records.
const DefaultDNSMaxRecords = 3

// MaxDNSTTL is the largest [dns] ttl, in seconds: a week (resolvers cap
// a record's TTL lower anyway).
const MaxDNSTTL = 7 * 24 * 60 * 60

// validate checks the [dns] keys: listen empty or host:port, domain a DNS
// name, ttl from 0 to MaxDNSTTL seconds, max_records at least 1.
func (d DNS) validate() error {
	if d.Listen != "" {
		if err := validHostPort("dns.listen", d.Listen, "want host:port, e.g. 127.0.0.1:8600 (empty turns DNS off)"); err != nil {
			return err
		}
	}
	if err := validDomain(d.Domain); err != nil {
		return err
	}
	if d.TTL < 0 || d.TTL > MaxDNSTTL {
		return &switchboard.FieldError{Field: "dns.ttl", Value: strconv.Itoa(d.TTL), Reason: fmt.Sprintf("must be seconds from 0 to %d (a week)", MaxDNSTTL)}
	}
	if d.MaxRecords < 1 {
		return &switchboard.FieldError{Field: "dns.max_records", Value: strconv.Itoa(d.MaxRecords), Reason: "must be at least 1"}
	}
	return nil
}

// validHostPort checks host:port with a port from 0 to 65535.
func validHostPort(field, addr, want string) error {
	if err := validListen(addr); err != nil {
		return &switchboard.FieldError{Field: field, Value: addr, Reason: want}
	}
	return nil
}

// validDomain checks [dns] domain: dot-separated labels of letters, digits
// and '-', each 1 to 63 characters, at most 253 in all; one trailing dot
// is allowed.
func validDomain(domain string) error {
	bad := func(why string) error {
		return &switchboard.FieldError{Field: "dns.domain", Value: domain, Reason: why + "; want a DNS name such as switchboard or sd.example.internal"}
	}
	name := strings.TrimSuffix(domain, ".")
	if name == "" {
		return bad("must not be empty")
	}
	if len(name) > 253 {
		return bad("longer than 253 characters")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return bad(fmt.Sprintf("label %q must be 1 to 63 characters", label))
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return bad(fmt.Sprintf("label %q may hold only letters, digits and '-'", label))
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return bad(fmt.Sprintf("label %q must not begin or end with '-'", label))
		}
	}
	return nil
}
