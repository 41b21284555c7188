package remote

import (
	"context"
	"net/http"
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

func (c *Client) lease(ctx context.Context, op string, req schema.LeaseRequest) (switchboard.Lease, error) {
	var out schema.LeaseJSON
	if err := c.do(ctx, http.MethodPost, "/v1/leases/"+op, req, &out); err != nil {
		return switchboard.Lease{}, err
	}
	return fromJSON(out)
}

// Acquire implements switchboard.Leaser.
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
	return c.do(ctx, http.MethodPost, "/v1/leases/release", schema.LeaseRequest{Name: l.Name, Holder: l.Holder, Token: l.Token, TTL: l.TTL.String()}, nil)
}

// Leases implements switchboard.Leaser.
func (c *Client) Leases(ctx context.Context) ([]switchboard.Lease, error) {
	var list []schema.LeaseJSON
	if err := c.do(ctx, http.MethodGet, "/v1/leases", nil, &list); err != nil {
		return nil, err
	}
	out := make([]switchboard.Lease, 0, len(list))
	for _, l := range list {
		le, err := fromJSON(l)
		if err != nil {
			return nil, err
		}
		out = append(out, le)
	}
	return out, nil
}
