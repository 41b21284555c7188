package remote

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

func fromJSON(l schema.LeaseJSON) (switchboard.Lease, error) {
	ttl, err := time.ParseDuration(l.TTL)
	if err != nil {
		return switchboard.Lease{}, err
	}
	return switchboard.Lease{Name: l.Name, Holder: l.Holder, Token: l.Token, TTL: ttl, ExpiresAt: l.ExpiresAt}, nil
}

// leaseKey keys the secrets of leases this client acquired: by name and
// holder (a process may hold one lease as several holders).
func leaseKey(name, holder string) string { return name + "\x00" + holder }

func (c *Client) leaseSecret(name, holder string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaseSecrets[leaseKey(name, holder)]
}

func (c *Client) lease(ctx context.Context, op string, req schema.LeaseRequest) (switchboard.Lease, error) {
	req.Secret = c.leaseSecret(req.Name, req.Holder)
	var hdr []string
	if req.Secret == "" && op == "acquire" {
		// A secret of this client's own, in the header: a server of an
		// earlier release ignores it (and would refuse it in the body),
		// so the lease is taken there without one, as it always was.
		hdr = []string{schema.LeaseSecretHeader, schema.NewSecret()}
	}
	var out schema.LeaseJSON
	if err := c.do(ctx, http.MethodPost, "/v1/leases/"+op, req, &out, hdr...); err != nil {
		return switchboard.Lease{}, err
	}
	if out.Secret != "" {
		c.mu.Lock()
		c.leaseSecrets[leaseKey(req.Name, req.Holder)] = out.Secret
		c.mu.Unlock()
	}
	return fromJSON(out)
}

// Acquire implements switchboard.Leaser. It takes the lease with a secret
// of this client's own, which the server returns with the lease; this
// client keeps it (by name and holder) for the lease's renewals, its
// release, and acquiring it again as the same holder, and sends it again
// on the next term, so the holder keeps one secret. A server of an
// earlier release returns none: its leases have no secret.
func (c *Client) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	// Validated here too: JSON would carry invalid UTF-8 as U+FFFD, a
	// different name or holder the server would accept.
	if err := switchboard.ValidateLease(name, holder); err != nil {
		return switchboard.Lease{}, err
	}
	return c.lease(ctx, "acquire", schema.LeaseRequest{Name: name, Holder: holder, TTL: ttl.String()})
}

// Renew implements switchboard.Leaser.
func (c *Client) Renew(ctx context.Context, l switchboard.Lease) (switchboard.Lease, error) {
	if err := switchboard.ValidateLease(l.Name, l.Holder); err != nil {
		return switchboard.Lease{}, err
	}
	return c.lease(ctx, "renew", schema.LeaseRequest{Name: l.Name, Holder: l.Holder, Token: l.Token, TTL: l.TTL.String()})
}

// Release implements switchboard.Leaser.
func (c *Client) Release(ctx context.Context, l switchboard.Lease) error {
	if err := switchboard.ValidateLease(l.Name, l.Holder); err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, "/v1/leases/release", schema.LeaseRequest{Name: l.Name, Holder: l.Holder, Token: l.Token,
		TTL: l.TTL.String(), Secret: c.leaseSecret(l.Name, l.Holder)}, nil)
}

// Leases implements switchboard.Leaser: every page of the server's list.
func (c *Client) Leases(ctx context.Context) ([]switchboard.Lease, error) {
	var out []switchboard.Lease
	after := ""
	for {
		path := "/v1/leases?limit=1000"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		var page []schema.LeaseJSON
		next, err := c.doNext(ctx, path, &page)
		if err != nil {
			return nil, err
		}
		for _, l := range page {
			le, err := fromJSON(l)
			if err != nil {
				return nil, err
			}
			out = append(out, le)
		}
		// An older server sends one page of everything and no header.
		if next == "" || len(page) == 0 {
			if out == nil {
				out = []switchboard.Lease{}
			}
			return out, nil
		}
		after = next
	}
}
