package checks

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/switchboard-io/switchboard"
)

// Policy says which hosts a check may target. A check is a request the
// runner makes on a registrant's behalf; without a policy any registrant
// could make the server probe any address of its network. The zero Policy
// lets a check target only the host of its instance's own Address;
// Allow and Hosts list what may be targeted beyond that.
//
// A host name is judged by its name, not by the addresses it resolves to.
type Policy struct {
	// Allow lists the IP ranges a check may target by IP address.
	Allow []netip.Prefix
	// Hosts lists the host names a check may target: a name matches
	// itself (case-insensitively); ".example.com" matches every name
	// under example.com (not example.com itself).
	Hosts []string
}

// ParsePolicy parses a comma-separated list of CIDRs (10.0.0.0/8), IP
// addresses (one address each) and host names (db.internal, or
// .internal for every name under it), as the checks.allow setting holds
// it. field names the setting in errors.
func ParsePolicy(field, list string) (Policy, error) {
	var p Policy
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			pfx, err := netip.ParsePrefix(item)
			if err != nil {
				return Policy{}, switchboard.NewFieldError(switchboard.ErrInvalid, field, item, "not a CIDR; want one such as 10.0.0.0/8 or fd00::/8")
			}
			if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
				// An IPv4-mapped range matches IPv4 addresses, as the
				// targets are compared unmapped.
				pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
			}
			p.Allow = append(p.Allow, pfx.Masked())
			continue
		}
		if a, err := netip.ParseAddr(strings.Trim(item, "[]")); err == nil {
			a = a.Unmap()
			p.Allow = append(p.Allow, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		name := strings.TrimPrefix(item, ".")
		if err := switchboard.ValidateAddress(name + ":1"); err != nil || strings.ContainsAny(name, "[]:") {
			return Policy{}, switchboard.NewFieldError(switchboard.ErrInvalid, field, item, "want a CIDR, an IP address or a host name (.example.com for every name under it)")
		}
		p.Hosts = append(p.Hosts, strings.ToLower(item))
	}
	return p, nil
}

// String is the policy as ParsePolicy reads it.
func (p Policy) String() string {
	var parts []string
	for _, pfx := range p.Allow {
		parts = append(parts, pfx.String())
	}
	return strings.Join(append(parts, p.Hosts...), ",")
}

// Check reports whether in's check (if any) may run: its target must parse
// (switchboard.ParseCheckTarget) and name the host of in.Address, an IP
// address in Allow, or a host in Hosts. A refusal is a
// *switchboard.FieldError on "check.target" wrapping switchboard.ErrInvalid.
func (p Policy) Check(in switchboard.Instance) error {
	if in.Check == nil {
		return nil
	}
	t, err := switchboard.ParseCheckTarget(in.Check.Target)
	if err != nil {
		return err
	}
	own, _, err := switchboard.SplitHostPort(in.Address)
	if err == nil && sameHost(strings.Trim(own, "[]"), t.Host) || p.allows(t.Host) {
		return nil
	}
	if err != nil {
		own = "none: the instance's address is no host:port"
	}
	return switchboard.NewFieldError(switchboard.ErrInvalid, "check.target", in.Check.Target,
		fmt.Sprintf("host %s is neither the instance's own host (%s) nor allowed by checks.allow", t.Host, own))
}

// allows reports whether host (an IP address or a name) is listed.
func (p Policy) allows(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap().WithZone("")
		for _, pfx := range p.Allow {
			if pfx.Contains(a) {
				return true
			}
		}
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range p.Hosts {
		if strings.HasPrefix(h, ".") && strings.HasSuffix(host, h) || h == host {
			return true
		}
	}
	return false
}

// sameHost compares two hosts: IP addresses by value, names without case
// or a trailing dot.
func sameHost(a, b string) bool {
	x, errA := netip.ParseAddr(a)
	y, errB := netip.ParseAddr(b)
	if errA == nil && errB == nil {
		return x.Unmap() == y.Unmap()
	}
	return errA != nil && errB != nil && strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}
