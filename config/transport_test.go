package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

func TestTransport(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "[transport]\nnats_url = \"nats://file:4222\"\nnats_transport = \"core\"\n")
	c, err := config.Load(p, env{}.get)
	if err != nil || c.Transport.NATSURL != "nats://file:4222" || c.Transport.NATSJetStream() {
		t.Fatalf("file: %+v %v", c.Transport, err)
	}
	// The SDK's variables override the file; SWITCHBOARD_ ones override both.
	c, err = config.Load(p, env{"TINY_NATS_URL": "nats://tiny:4222", "TINY_NATS_TRANSPORT": "jetstream"}.get)
	if err != nil || c.Transport.NATSURL != "nats://tiny:4222" || !c.Transport.NATSJetStream() {
		t.Fatalf("TINY_: %+v %v", c.Transport, err)
	}
	c, err = config.Load(p, env{"TINY_NATS_URL": "nats://tiny:4222", "SWITCHBOARD_TRANSPORT_NATS_URL": "nats://sb:4222,nats://sb2:4222"}.get)
	if err != nil || c.Transport.NATSURL != "nats://sb:4222,nats://sb2:4222" {
		t.Fatalf("SWITCHBOARD_: %+v %v", c.Transport, err)
	}
	if c, err := config.Load("", env{}.get); err != nil || c.Transport != (config.Transport{}) {
		t.Fatalf("default: %+v %v", c.Transport, err)
	}
	for _, tc := range []struct{ k, v, field string }{
		{"TINY_NATS_TRANSPORT", "durable", "TINY_NATS_TRANSPORT"},
		{"TINY_NATS_URL", "http://user:secret@x:4222", "TINY_NATS_URL"},
		{"TINY_NATS_URL", "nats://", "TINY_NATS_URL"},
		{"SWITCHBOARD_TRANSPORT_NATS_URL", "nats://", "SWITCHBOARD_TRANSPORT_NATS_URL"},
	} {
		_, err := config.Load("", env{tc.k: tc.v}.get)
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s=%q: %v", tc.k, tc.v, err)
		}
	}
	if _, err := config.Load(writeFile(t, t.TempDir(), "[transport]\nnats = 1\n"), env{}.get); err == nil || !strings.Contains(err.Error(), "transport.nats") {
		t.Errorf("unknown key: %v", err)
	}
}
