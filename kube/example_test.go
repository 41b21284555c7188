package kube_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
)

// A module's main in a cluster: register as a TinyModule, elect a leader
// that publishes the status, and send to other modules through a pool that
// the TinyModule watch keeps current. (Not run: it needs a cluster.)
func ExampleStartModule() {
	ctx := context.Background()
	pl := pool.New(pool.Options{})
	pl.Start(ctx)
	m, err := kube.StartModule(ctx, kube.ModuleConfig{
		Name:    "github.com/acme/my-module", // TinyModule "github-com-acme-my-module", Lease "…-lock"
		Version: "1.0.0",
		Addr:    os.Getenv("SELF_SERVICE_HOST") + ":8483",
		Pool:    pl, // every other module of the namespace, at its address while it is alive
	})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close() // the leader releases the Lease: another replica takes over at once

	r, _ := router.New(router.Options{Module: m.Name(), Wire: pl})
	out, err := r.Send(ctx, &router.Message{To: "flow1.common-module.split:in", Payload: []byte("hi")})
	fmt.Println(string(out), err)
}

// The catalog of a namespace, as `switchboard ls --dsn kube://tinysystems`
// reads it. (Not run: it needs a cluster.)
func ExampleCatalog() {
	ctx := context.Background()
	cat, err := switchboard.Open(ctx, "kube://tinysystems", switchboard.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	live, _ := cat.List(ctx, switchboard.Query{}) // modules whose Lease is held
	for _, in := range live {
		fmt.Println(in.Name, in.Address, in.Metadata[kube.MetaLeader])
	}
}
