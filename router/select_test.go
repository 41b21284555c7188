package router

import (
	"context"
	"errors"
	"testing"
)

// tagWire answers with its own name.
type tagWire string

func (w tagWire) Send(context.Context, *Message) ([]byte, error) { return []byte(w), nil }

func TestSelect(t *testing.T) {
	book := map[string][]string{
		"on-nats":  {"nats://tinymodule.on-nats.msg"},
		"on-grpc":  {"127.0.0.1:9000"},
		"on-both":  {"nats://tinymodule.on-both.msg", "10.0.0.1:8483"},
		"unknown2": nil,
	}
	lookup := func(m string) []string { return book[m] }
	nw, gw := tagWire("nats"), tagWire("grpc")
	tests := []struct {
		name     string
		sel      Select
		module   string
		want     string
		wantCode string
	}{
		{"nats target, grpc default", Select{NATS: nw, GRPC: gw, Addresses: lookup}, "on-nats", "nats", ""},
		{"grpc target, nats default", Select{NATS: nw, GRPC: gw, Addresses: lookup, PreferNATS: true}, "on-grpc", "grpc", ""},
		{"both, nats preferred", Select{NATS: nw, GRPC: gw, Addresses: lookup, PreferNATS: true}, "on-both", "nats", ""},
		{"both, grpc preferred", Select{NATS: nw, GRPC: gw, Addresses: lookup}, "on-both", "grpc", ""},
		{"both, only nats configured", Select{NATS: nw, Addresses: lookup}, "on-both", "nats", ""},
		{"unknown, nats default", Select{NATS: nw, GRPC: gw, Addresses: lookup, PreferNATS: true}, "unknown", "nats", ""},
		{"unknown, grpc default", Select{NATS: nw, GRPC: gw, Addresses: lookup}, "unknown", "grpc", ""},
		{"unknown, only nats", Select{NATS: nw}, "unknown", "nats", ""},
		{"nats target without nats", Select{GRPC: gw, Addresses: lookup}, "on-nats", "", CodeNotDialable},
		{"grpc target without grpc", Select{NATS: nw, Addresses: lookup, PreferNATS: true}, "on-grpc", "", CodeNotDialable},
		{"nothing configured", Select{}, "unknown", "", CodeModuleUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.sel.Send(context.Background(), &Message{To: "f." + tc.module + ".n:p"})
			if tc.wantCode != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != tc.wantCode {
					t.Fatalf("err = %v, want code %s", err, tc.wantCode)
				}
				return
			}
			if err != nil || string(out) != tc.want {
				t.Fatalf("went over %q (%v), want %q", out, err, tc.want)
			}
		})
	}
	if _, err := (&Select{NATS: nw}).Send(context.Background(), &Message{To: "bad"}); err == nil {
		t.Fatal("accepted a malformed destination")
	}
}
