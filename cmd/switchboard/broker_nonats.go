//go:build nonats

package main

import "errors"

// broker is a running embedded NATS broker.
type broker interface {
	ClientURL() string
	Shutdown()
}

// startBroker fails: built with -tags nonats, the binary has no embedded
// broker (`nats`, `serve --nats`); the NATS wire to a broker run elsewhere
// is still there.
func startBroker(*globals, string, string) (broker, error) {
	return nil, errors.New("the embedded NATS broker is left out of this switchboard (built with -tags nonats): build it without that tag, or run nats-server and point TINY_NATS_URL at it")
}
