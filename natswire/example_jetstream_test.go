package natswire_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/switchboard-io/switchboard/natswire"
	"github.com/switchboard-io/switchboard/natswire/embedded"
	"github.com/switchboard-io/switchboard/router"
)

// The durable wire: a message is stored in the JetStream work queue,
// consumed by the module's durable consumer, answered over core NATS and
// then acknowledged, so a receiver that dies mid-message does not lose it.
func ExampleNew_jetStream() {
	quiet := slog.New(slog.DiscardHandler)
	dir, _ := os.MkdirTemp("", "natswire-jetstream-example-")
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
	w, err := natswire.New(nc, natswire.Options{Mode: natswire.JetStream, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	ledger, _ := router.New(router.Options{Module: "ledger", Logger: quiet})
	ledger.Handle("post", func(_ context.Context, m *router.Message) ([]byte, error) {
		return []byte("posted " + string(m.Payload)), nil
	})
	recv, err := w.Listen("ledger", ledger.Dispatch)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer recv.Close()

	client, _ := router.New(router.Options{Wire: w, Logger: quiet})
	out, err := client.Send(context.Background(), &router.Message{To: "books.ledger.post:in", Payload: []byte("entry-1")})
	fmt.Println(string(out), err)
	// Output: posted entry-1 <nil>
}
