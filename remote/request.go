package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// errNoAnswer is the cause of a request context that Config.RequestTimeout
// ended.
var errNoAnswer = errors.New("no answer within the request timeout")

// bounded is ctx bounded by Config.RequestTimeout (unless its own deadline
// comes first, or the timeout is off), with errNoAnswer as its cause.
func (c *Client) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.cfg.RequestTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, c.cfg.RequestTimeout, errNoAnswer)
}

// noAnswer is the error of a request to url that the server did not answer
// within Config.RequestTimeout.
func (c *Client) noAnswer(method, url string) error {
	return fmt.Errorf("switchboard server did not answer %s %s within %s (remote.Config.RequestTimeout): %w",
		method, url, c.cfg.RequestTimeout, ErrUnavailable)
}

// do sends one request and decodes a 2xx JSON body into out (unless nil),
// within Config.RequestTimeout.
func (c *Client) do(ctx context.Context, method, path string, body any, out any, hdr ...string) error {
	return c.doHeader(ctx, method, path, body, out, nil, hdr...)
}

// doNext is do for a GET of one page of a list: it returns the response's
// schema.LeaseNextHeader ("" on the last page).
func (c *Client) doNext(ctx context.Context, path string, out any) (string, error) {
	var got http.Header
	err := c.doHeader(ctx, http.MethodGet, path, nil, out, &got)
	return got.Get(schema.LeaseNextHeader), err
}

// doHeader is do that also stores the response's headers in got, unless
// nil.
func (c *Client) doHeader(ctx context.Context, method, path string, body any, out any, got *http.Header, hdr ...string) error {
	if c.closed.Load() {
		return switchboard.ErrClosed
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	err := c.send(ctx, method, path, body, out, hdr, got)
	var answered *APIError
	if err != nil && errors.Is(context.Cause(ctx), errNoAnswer) && !errors.As(err, &answered) {
		// An error the server answered whole (a 404, a 409) is its answer,
		// even when the timeout fires as it is read.
		return c.noAnswer(method, c.base+path)
	}
	return err
}

func (c *Client) send(ctx context.Context, method, path string, body any, out any, hdr []string, got *http.Header) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.auth(req)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if c.closed.Load() {
			return switchboard.ErrClosed
		}
		return transportError(ctx, c.base, err)
	}
	defer resp.Body.Close()
	if got != nil {
		*got = resp.Header
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp)
	}
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("switchboard server %s: reading the response: %w", c.base, err)
	}
	return nil
}

func (c *Client) auth(req *http.Request) {
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
}
