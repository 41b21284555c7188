package postgres_test

import (
	"context"
	"log"

	"github.com/switchboard-io/switchboard"
	_ "github.com/switchboard-io/switchboard/postgres" // registers the postgres:// backend
)

// Several hosts share one catalog: each opens the same database, registers
// its instances, and watches the others (pushed through LISTEN/NOTIFY).
func Example() {
	ctx := context.Background()
	cat, err := switchboard.Open(ctx, "postgres://switchboard@db.internal:5432/switchboard?sslmode=disable", switchboard.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{
		Name: "writer", Type: switchboard.TypeWriter, Address: "10.0.0.7:4317",
		Capabilities: []string{switchboard.CapStorage},
	}, switchboard.BootstrapOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	events, err := cat.Watch(ctx, switchboard.Query{Capability: switchboard.CapStorage})
	if err != nil {
		log.Fatal(err)
	}
	for ev := range events {
		log.Println(ev.Kind, ev.Instance.ID, ev.Instance.Address)
	}
}
