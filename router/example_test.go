package router_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchboard-io/switchboard/router"
)

// A router delivers a message to a node of its own module through the
// node's handler; a failure carries a code and whether a retry may cure it.
func ExampleRouter_Send() {
	r, err := router.New(router.Options{Module: "billing", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	r.Handle("charge", func(_ context.Context, m *router.Message) ([]byte, error) {
		if len(m.Payload) == 0 {
			return nil, router.Permanent("empty_order", "nothing to charge")
		}
		return []byte("charged " + string(m.Payload)), nil
	})

	ctx := context.Background()
	out, err := r.Send(ctx, &router.Message{To: "shop.billing.charge:in", Payload: []byte("order-7")})
	fmt.Println(string(out), err)

	_, err = r.Send(ctx, &router.Message{To: "shop.billing.charge:in"})
	var e *router.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Retryable)
	}
	// Output:
	// charged order-7 <nil>
	// empty_order false
}

// A retry policy on an edge retries what the receiver says is retryable.
func ExampleRouter_SetEdgePolicy() {
	r, _ := router.New(router.Options{Module: "billing", Logger: slog.New(slog.DiscardHandler)})
	attempts := 0
	r.Handle("charge", func(context.Context, *router.Message) ([]byte, error) {
		attempts++
		if attempts < 3 {
			return nil, router.Transient("ledger_busy", "try again")
		}
		return []byte("ok"), nil
	})
	r.SetEdgePolicy("cart-to-billing", router.RetryPolicy{MaxAttempts: 5, InitialDelay: time.Millisecond})

	out, err := r.Send(context.Background(), &router.Message{To: "shop.billing.charge:in", EdgeID: "cart-to-billing"})
	fmt.Println(string(out), err, attempts)
	// Output: ok <nil> 3
}
