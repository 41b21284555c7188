package natswire

import (
	"testing"

	"github.com/switchboard-io/switchboard/router/routertest"
)

// The router's conformance suite on both NATS wires (the gRPC pool runs the
// same suite in package pool).

func TestRouterSuiteCore(t *testing.T) {
	routertest.Run(t, fabric(t, sharedURL, Options{Prefix: uniquePrefix()}, false))
}

func TestRouterSuiteJetStream(t *testing.T) {
	b := startBroker(t, t.TempDir(), -1)
	routertest.Run(t, fabric(t, b.ClientURL(), Options{Mode: JetStream}, true))
}
