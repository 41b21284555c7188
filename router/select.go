package router

import (
	"context"
	"fmt"
	"strings"
)

// Select is a Wire for mixed fleets: for each message it picks the wire of
// the destination module from the addresses the module advertises —
// "nats://…" over NATS, "host:port" over GRPC — so one process talks to SDK
// modules on NATS and to gRPC modules. A message is never handed to the
// gRPC wire for a module advertised only at nats:// addresses, so the pool
// never dials (nor needs starting) for NATS targets.
//
// A module that advertises both kinds goes over the preferred wire; a
// module with no known address goes over NATS when PreferNATS (its subject
// follows from its name, so no lookup is needed), else over GRPC (which
// reports it unknown).
type Select struct {
	// NATS carries messages to nats:// modules (nil: none configured).
	NATS Wire
	// GRPC carries messages to host:port modules (nil: none configured).
	GRPC Wire
	// Addresses returns what module advertises (nil or empty: unknown).
	// It is called for every message: make it cheap (a discovery cache
	// lookup, not a catalog query).
	Addresses func(module string) []string
	// PreferNATS makes NATS the default wire (TINY_NATS_URL is set).
	PreferNATS bool
}

// Send implements Wire.
func (s *Select) Send(ctx context.Context, msg *Message) ([]byte, error) {
	if msg == nil {
		return nil, NoMessage()
	}
	nn, err := ParseTo(msg.To)
	if err != nil {
		return nil, err
	}
	w, err := s.WireFor(nn.Module)
	if err != nil {
		return nil, err
	}
	return w.Send(ctx, msg)
}

// WireFor returns the wire a message to module takes, or a permanent
// CodeNotDialable error when the module is reachable only over a wire that
// is not configured.
func (s *Select) WireFor(module string) (Wire, error) {
	var addrs []string
	if s.Addresses != nil {
		addrs = s.Addresses(module)
	}
	onNATS, onGRPC := false, false
	for _, a := range addrs {
		if strings.HasPrefix(a, "nats://") {
			onNATS = true
		} else {
			onGRPC = true
		}
	}
	switch {
	case onNATS && onGRPC:
		if s.PreferNATS && s.NATS != nil || s.GRPC == nil {
			return s.need(s.NATS, module, addrs, "NATS (set TINY_NATS_URL)")
		}
		return s.GRPC, nil
	case onNATS:
		return s.need(s.NATS, module, addrs, "NATS (set TINY_NATS_URL)")
	case onGRPC:
		return s.need(s.GRPC, module, addrs, "gRPC")
	}
	if s.PreferNATS && s.NATS != nil || s.GRPC == nil {
		if s.NATS == nil {
			return nil, Transient(CodeModuleUnknown, fmt.Sprintf("module %q address is unknown and no wire is configured", module))
		}
		return s.NATS, nil
	}
	return s.GRPC, nil
}

func (s *Select) need(w Wire, module string, addrs []string, what string) (Wire, error) {
	if w == nil {
		return nil, Permanent(CodeNotDialable, fmt.Sprintf("module %q is advertised at %s, which needs the %s wire, not configured in this process", module, strings.Join(addrs, ", "), what))
	}
	return w, nil
}
