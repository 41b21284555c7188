package natswire

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchboard-io/switchboard/router"
)

// TestOversizeReply: a result or an error text larger than the broker's
// max_payload cannot be sent back as is; the sender gets a prompt coded
// error instead of waiting for a reply that never comes (and a handler's
// error keeps its code, its text shortened).
func TestOversizeReply(t *testing.T) {
	for _, mode := range []Mode{Core, JetStream} {
		t.Run(mode.String(), func(t *testing.T) {
			b := startBroker(t, t.TempDir(), -1)
			rw := newWire(t, connect(t, b.ClientURL()), Options{Mode: mode})
			huge := int(rw.Conn().MaxPayload()) + 1
			listen(t, rw, "big", func(ctx context.Context, m *router.Message) ([]byte, error) {
				switch string(m.Payload) {
				case "result":
					return bytes.Repeat([]byte("r"), huge), nil
				case "error":
					return nil, router.Permanent("x_long", strings.Repeat("e", huge))
				}
				return []byte("small"), nil
			})
			w := newWire(t, connect(t, b.ClientURL()), Options{Mode: mode})
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			_, err := w.Send(ctx, &router.Message{To: "f.big.n:in", Payload: []byte("result")})
			if e := router.AsError(err); e == nil || e.Code != router.CodeResourceExhausted || e.Retryable {
				t.Fatalf("oversize result: %v", err)
			}
			_, err = w.Send(ctx, &router.Message{To: "f.big.n:in", Payload: []byte("error")})
			if e := router.AsError(err); e == nil || e.Code != "x_long" || e.Retryable || !strings.HasPrefix(e.Message, "eeee") {
				t.Fatalf("oversize error text: %.200v", err)
			}
			if out, err := w.Send(ctx, &router.Message{To: "f.big.n:in"}); err != nil || string(out) != "small" {
				t.Fatalf("afterwards: %q %v", out, err)
			}
		})
	}
}

// TestShutdownCancelIsNotTheHandlersFailure: a handler still running when
// its receiver stops (grace period over, its context ended) has not failed:
// on JetStream the message goes to another replica (not terminated, not
// answered with the shutdown's cancellation), and on core NATS the sender
// gets a retryable error, not a "canceled" it never asked for.
func TestShutdownCancelIsNotTheHandlersFailure(t *testing.T) {
	for _, mode := range []Mode{Core, JetStream} {
		t.Run(mode.String(), func(t *testing.T) {
			b := startBroker(t, t.TempDir(), -1)
			opts := Options{Mode: mode, GracePeriod: 50 * time.Millisecond}
			started := make(chan struct{}, 4)
			w1 := newWire(t, connect(t, b.ClientURL()), opts)
			r1, err := w1.Listen("stopping", func(ctx context.Context, m *router.Message) ([]byte, error) {
				started <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r1.Close)
			sender := newWire(t, connect(t, b.ClientURL()), opts)
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			type result struct {
				out []byte
				err error
			}
			res := make(chan result, 1)
			go func() {
				out, err := sender.Send(ctx, &router.Message{To: "f.stopping.n:in", Payload: []byte("job")})
				res <- result{out, err}
			}()
			within(t, started)
			if mode == JetStream {
				// A durable publish (no reply inbox) too.
				if err := sender.Publish(ctx, &router.Message{To: "f.stopping.n:in", Payload: []byte("durable")}); err != nil {
					t.Fatal(err)
				}
				within(t, started)
			}
			r1.Close()
			if mode == Core {
				r := within(t, res)
				if e := router.AsError(r.err); e == nil || e.Code == router.CodeCanceled || !e.Retryable {
					t.Fatalf("send to a replica that shut down: %v", r.err)
				}
				return
			}
			got := make(chan string, 4)
			listen(t, newWire(t, connect(t, b.ClientURL()), opts), "stopping", func(ctx context.Context, m *router.Message) ([]byte, error) {
				got <- string(m.Payload)
				return []byte("done:" + string(m.Payload)), nil
			})
			seen := map[string]bool{within(t, got): true, within(t, got): true}
			if !seen["job"] || !seen["durable"] {
				t.Fatalf("the other replica got %v", seen)
			}
			r := within(t, res)
			if r.err != nil || string(r.out) != "done:job" {
				t.Fatalf("sender: out=%q err=%v", r.out, r.err)
			}
		})
	}
}

// TestConnectErrorHidesSecrets: a failed connection's error never shows a
// password or token, whatever form the URL takes (no scheme, a URL the
// client cannot parse, a list of servers).
func TestConnectErrorHidesSecrets(t *testing.T) {
	for _, url := range []string{
		"user:s3cret@127.0.0.1:1",
		"nats://user:s3cret@127.0.0.1:bad",
		"tls://user:s3cret@[::1",
		"nats://a:s3cret@127.0.0.1:1,nats://b:s3cret2@127.0.0.1:2",
		"nats://s3cret@127.0.0.1:1",
	} {
		_, err := Connect(url, ConnectOptions{Logger: quiet, Timeout: 200 * time.Millisecond})
		if err == nil {
			t.Fatalf("%s: connected", url)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error shows the secret: %v", url, err)
		}
		if strings.Contains(url, "127.0.0.1:1") && !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%s: error does not say where: %v", url, err)
		}
	}
	if _, err := Connect("nats://u:p@127.0.0.1:1", ConnectOptions{Logger: quiet}); !errors.Is(err, nats.ErrNoServers) {
		t.Errorf("the cause is lost: %v", err)
	}
}

// TestBlankErrorTextIsStillAnError: the SDK sees a failure only in a
// non-empty x-error (it ignores x-error-code alone), and the client trims
// header values; an error whose text is blank must still arrive as one.
func TestBlankErrorTextIsStillAnError(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	listen(t, newWire(t, connect(t, b.ClientURL()), Options{}), "blank", func(ctx context.Context, m *router.Message) ([]byte, error) {
		if string(m.Payload) == "plain" {
			return nil, errors.New("\r\n")
		}
		return nil, router.Permanent("x_blank", " \t ")
	})
	sdk := connect(t, b.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, p := range []string{"coded", "plain"} {
		reply, err := sdkRequest(ctx, sdk, "tinymodule.blank.msg", "f.blank.n:in", "e", 0, []byte(p))
		if err != nil {
			t.Fatal(err)
		}
		if reply.Header.Get(HeaderError) == "" {
			t.Errorf("%s: the SDK reads a success: headers %v", p, reply.Header)
		}
	}
}

// TestCloseEndsWaitingSends: closing a JetStream wire drops its reply
// subscription, so a send still waiting for its reply can never get one;
// it returns at once instead of holding its goroutine until the request
// timeout (5 minutes by default).
func TestCloseEndsWaitingSends(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1)
	listen(t, newWire(t, connect(t, b.ClientURL()), Options{Mode: JetStream}), "slow", func(ctx context.Context, m *router.Message) ([]byte, error) {
		started <- struct{}{}
		<-release
		return nil, nil
	})
	w := newWire(t, connect(t, b.ClientURL()), Options{Mode: JetStream})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := w.Send(ctx, &router.Message{To: "f.slow.n:in"})
		errc <- err
	}()
	within(t, started)
	w.Close()
	err := within(t, errc)
	if e := router.AsError(err); e == nil || e.Code != router.CodeUnavailable || e.Retryable || ctx.Err() != nil {
		t.Fatalf("send waiting while its wire closed: %v", err)
	}
	// And a send after Close: final too, no retry can succeed on it.
	_, err = w.Send(ctx, &router.Message{To: "f.slow.n:in"})
	if e := router.AsError(err); e == nil || e.Code != router.CodeUnavailable || e.Retryable {
		t.Fatalf("send on a closed wire: %v", err)
	}
}
