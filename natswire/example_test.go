package natswire_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/switchboard-io/switchboard/natswire"
	"github.com/switchboard-io/switchboard/natswire/embedded"
	"github.com/switchboard-io/switchboard/router"
)

// A module served over NATS and a router that sends to it by node name.
func Example() {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, _ := os.MkdirTemp("", "natswire-example-")
	defer os.RemoveAll(dir)
	broker, err := embedded.Start(embedded.Options{Dir: dir, Port: -1, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Shutdown()
	nc, err := natswire.Connect(broker.ClientURL(), natswire.ConnectOptions{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	w, _ := natswire.New(nc, natswire.Options{Logger: quiet}) // Mode: natswire.JetStream for the durable wire
	defer w.Close()

	// The module "greeter" on tinymodule.greeter.msg.
	greeter, _ := router.New(router.Options{Module: "greeter", Logger: quiet})
	greeter.HandleDefault(func(ctx context.Context, m *router.Message) ([]byte, error) {
		return []byte("hello, " + string(m.Payload)), nil
	})
	recv, _ := w.Listen("greeter", greeter.Dispatch)
	defer recv.Close()

	client, _ := router.New(router.Options{Wire: w, Logger: quiet})
	out, err := client.Send(context.Background(), &router.Message{To: "flow.greeter.node:in", Payload: []byte("nats")})
	fmt.Println(string(out), err, natswire.Address("greeter"))
	// Output: hello, nats <nil> nats://tinymodule.greeter.msg
}
