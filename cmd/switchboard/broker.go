//go:build !nonats

package main

import (
	"net"
	"strconv"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/natswire/embedded"
)

// broker is a running embedded NATS broker.
type broker interface {
	ClientURL() string
	Shutdown()
}

// startBroker starts the embedded NATS broker of `nats` and `serve --nats`
// on listen (host:port), its JetStream store in dir. -tags nonats leaves
// the broker out of the binary (broker_nonats.go).
func startBroker(g *globals, listen, dir string) (broker, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, usage(&switchboard.FieldError{Field: "listen", Value: listen, Reason: "want host:port, e.g. 127.0.0.1:4222"})
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return nil, usage(&switchboard.FieldError{Field: "listen", Value: listen, Reason: "port must be 0 to 65535"})
	}
	if p == 0 {
		p = -1 // any free port
	}
	s, err := embedded.Start(embedded.Options{Dir: dir, Host: host, Port: p, Logger: g.log})
	if err != nil {
		return nil, err // not a nil *embedded.Server in a non-nil broker
	}
	return s, nil
}
