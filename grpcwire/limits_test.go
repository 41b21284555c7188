package grpcwire

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/router"
)

// TestHugeErrorDoesNotBreakTheConnection: a handler error with a 20 MiB
// message (or code) reaches the caller cut short, with its code and
// retryable flag, and the other calls on the same connection go on. The
// whole text in the trailers would be over the client's header limit: a
// connection error that failed every call on the shared connection, each
// as a retryable "unavailable".
func TestHugeErrorDoesNotBreakTheConnection(t *testing.T) {
	huge := strings.Repeat("é", 10<<20) // 20 MiB, two bytes a character
	entered := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	cc := startServer(t, func(ctx context.Context, m *router.Message) ([]byte, error) {
		switch string(m.Payload) {
		case "slow":
			close(entered)
			select {
			case <-release:
				return []byte("done"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case "huge-message":
			return nil, router.Permanent("quota", huge)
		case "huge-code":
			return nil, router.Permanent("quota"+huge, "short")
		}
		return m.Payload, nil
	})
	c := modulepb.NewModuleServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	slow := make(chan error, 1)
	go func() {
		out, err := Call(ctx, c, &router.Message{To: "f.b.n:in", Payload: []byte("slow")})
		if err == nil && string(out) != "done" {
			err = errors.New("got " + string(out))
		}
		slow <- err
	}()
	<-entered

	_, err := Call(ctx, c, &router.Message{To: "f.b.n:in", Payload: []byte("huge-message")})
	var e *router.Error
	if !errors.As(err, &e) || e.Code != "quota" || e.Retryable {
		t.Fatalf("huge message: %.300v; want a permanent quota error", err)
	}
	if len(e.Message) > MaxErrorMessageLen+64 || !strings.HasPrefix(e.Message, "éé") || !strings.Contains(e.Message, "more bytes cut") || !utf8.ValidString(e.Message) {
		t.Fatalf("huge message arrived as %d bytes: %.100q…", len(e.Message), e.Message)
	}
	_, err = Call(ctx, c, &router.Message{To: "f.b.n:in", Payload: []byte("huge-code")})
	if !errors.As(err, &e) || !strings.HasPrefix(e.Code, "quotaé") || len(e.Code) > MaxErrorCodeLen || e.Retryable || e.Message != "short" {
		t.Fatalf("huge code: %.300v; want a permanent error with the code cut short", err)
	}

	releaseOnce.Do(func() { close(release) })
	if err := <-slow; err != nil {
		t.Fatalf("the call in flight on the same connection failed: %v", err)
	}
}

// TestInvalidUTF8MessageIsRefusedClearly: protobuf cannot marshal a string
// field that is not UTF-8, so such a message never leaves; the caller gets
// a permanent invalid_argument naming the field, not a "remote_error" (as
// if the peer's handler had failed) or an opaque marshalling error.
func TestInvalidUTF8MessageIsRefusedClearly(t *testing.T) {
	cc := startServer(t, router.Echo)
	c := modulepb.NewModuleServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		msg  router.Message
		want string
	}{
		{router.Message{To: "f.b.n:in", From: "f.a.\xff:out"}, "From"},
		{router.Message{To: "f.b.n:in", EdgeID: "e\xfe"}, "EdgeID"},
		{router.Message{To: "f.b.n:in", ID: "\xc3"}, "ID"},
		{router.Message{To: "f.b.\xffn:in"}, "To"},
		{router.Message{To: "f.b.n:in", Metadata: map[string]string{"k": "v\xff"}}, `metadata value of "k"`},
		{router.Message{To: "f.b.n:in", Metadata: map[string]string{"k\xff": "v"}}, "metadata key"},
	} {
		_, err := Call(ctx, c, &tc.msg)
		var e *router.Error
		if !errors.As(err, &e) || e.Code != "invalid_argument" || e.Retryable || !strings.Contains(e.Message, tc.want) || !strings.Contains(e.Message, "UTF-8") {
			t.Errorf("%+v: got %v; want a permanent invalid_argument naming %s", tc.msg, err, tc.want)
		}
	}
	// Invalid UTF-8 in the payload (bytes) goes through as is.
	out, err := Call(ctx, c, &router.Message{To: "f.b.n:in", Payload: []byte("\xff\xfe")})
	if err != nil || string(out) != "\xff\xfe" {
		t.Fatalf("binary payload: %q, %v", out, err)
	}
}
