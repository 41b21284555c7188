package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

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

// noAnswerError is a request that a server did not answer within
// Config.RequestTimeout. It is ErrUnavailable.
type noAnswerError struct {
	method, url string
	timeout     time.Duration
	bound       string // what set the timeout
}

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("switchboard server did not answer %s %s within %s (%s): %v",
		e.method, e.url, e.timeout, e.bound, ErrUnavailable)
}

func (e *noAnswerError) Unwrap() error { return ErrUnavailable }

// noAnswer is the error of a request to url that the server did not answer
// within Config.RequestTimeout.
func (c *Client) noAnswer(method, url string) error {
	return &noAnswerError{method: method, url: url, timeout: c.cfg.RequestTimeout, bound: "remote.Config.RequestTimeout"}
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
	_, err := c.doOn(ctx, method, path, body, out, got, hdr...)
	return err
}

// doOn is doHeader that returns the server that answered, or the last one
// tried. It sends the request to the current server and, when that one
// cannot be reached, does not answer in time or answers 5xx, to the next
// (see servers), each at most once.
func (c *Client) doOn(ctx context.Context, method, path string, body any, out any, got *http.Header, hdr ...string) (*server, error) {
	if c.closed.Load() {
		return nil, switchboard.ErrClosed
	}
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	cands := c.srv.order()
	var err error
	for i, s := range cands {
		err = c.attempt(ctx, s, len(cands)-i-1, method, path, b, body != nil, out, got, hdr)
		if !movesOn(err) || ctx.Err() != nil || c.closed.Load() {
			if err == nil {
				c.srv.ok(s)
			}
			return s, err
		}
		next := c.srv.failed(s)
		if i+1 < len(cands) {
			c.log.Debug("switchboard server: request failed; trying the next server", "server", s.name, "next", cands[i+1].name, "method", method, "path", path, "err", err)
		} else if len(cands) > 1 {
			c.log.Debug("switchboard server: request failed on every server", "server", s.name, "current", next.name, "method", method, "path", path, "err", err)
		}
		if i+1 == len(cands) {
			return s, err
		}
	}
	return nil, err
}

// attempt sends one request to s within Config.RequestTimeout; when more
// servers remain to be tried and ctx has a deadline, within half the time
// left too, so that a server that does not answer leaves time for the next.
func (c *Client) attempt(ctx context.Context, s *server, more int, method, path string, body []byte, hasBody bool, out any, got *http.Header, hdr []string) error {
	actx, cancel := c.bounded(ctx)
	defer cancel()
	var share time.Duration
	if dl, ok := ctx.Deadline(); ok && more > 0 {
		share = time.Until(dl) / 2
		if c.cfg.RequestTimeout <= 0 || share < c.cfg.RequestTimeout {
			var cancelShare context.CancelFunc
			actx, cancelShare = context.WithTimeoutCause(actx, share, errNoAnswer)
			defer cancelShare()
		} else {
			share = 0
		}
	}
	err := c.send(actx, s, method, path, body, hasBody, out, hdr, got)
	var answered *APIError
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errNoAnswer) && !errors.As(err, &answered) {
		// An error the server answered whole (a 404, a 409) is its answer,
		// even when the timeout fires as it is read.
		if share > 0 {
			return &noAnswerError{method: method, url: s.base + path, timeout: share.Round(time.Millisecond),
				bound: "half the time the caller left, for another server to answer in the rest"}
		}
		return c.noAnswer(method, s.base+path)
	}
	return err
}

func (c *Client) send(ctx context.Context, s *server, method, path string, body []byte, hasBody bool, out any, hdr []string, got *http.Header) error {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	c.auth(req)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := s.http.Do(req)
	if err != nil {
		if c.closed.Load() {
			return switchboard.ErrClosed
		}
		return transportError(ctx, s.name, err)
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
		return fmt.Errorf("switchboard server %s: reading the response: %w", s.name, err)
	}
	return nil
}

func (c *Client) auth(req *http.Request) {
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
}
