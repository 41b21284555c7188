package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

// The [nats] keys: no credentials and one stream replica by default, read
// from the file and the environment, and every wrong value refused naming
// where it came from and never showing a password.
func TestNATSSection(t *testing.T) {
	c, err := config.Load("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS != (config.NATS{StreamReplicas: 1}) {
		t.Errorf("defaults: %+v", c.NATS)
	}
	p := writeFile(t, t.TempDir(), "[nats]\ncreds = \"~/app.creds\"\ntls_ca = \"ca.pem\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\ntls_first = true\nstream_replicas = 3\n")
	c, err = config.Load(p, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS != (config.NATS{Creds: "~/app.creds", TLSCA: "ca.pem", TLSCert: "c.pem", TLSKey: "k.pem", TLSFirst: true, StreamReplicas: 3}) {
		t.Errorf("from the file: %+v", c.NATS)
	}
	env := map[string]string{"SWITCHBOARD_NATS_USER": "alice", "SWITCHBOARD_NATS_PASSWORD": "pw-secret", "SWITCHBOARD_NATS_TLS_FIRST": "true",
		"SWITCHBOARD_NATS_NKEY": "u.nk", "SWITCHBOARD_NATS_TOKEN": "t", "SWITCHBOARD_NATS_STREAM_REPLICAS": "5"}
	c, err = config.Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS != (config.NATS{User: "alice", Password: "pw-secret", Nkey: "u.nk", Token: "t", TLSFirst: true, StreamReplicas: 5}) {
		t.Errorf("from the environment: %+v", c.NATS)
	}
	for _, tc := range []struct{ key, value, want string }{
		{"SWITCHBOARD_NATS_STREAM_REPLICAS", "0", "1 to 5"},
		{"SWITCHBOARD_NATS_STREAM_REPLICAS", "6", "1 to 5"},
		{"SWITCHBOARD_NATS_STREAM_REPLICAS", "three", "whole number"},
		{"SWITCHBOARD_NATS_TLS_FIRST", "yes please", "true or false"},
		{"SWITCHBOARD_NATS_PASSWORD", "pw-alone", "without nats.user"},
		{"SWITCHBOARD_NATS_TLS_CERT", "c.pem", "tls_key is not set"},
	} {
		_, err := config.Load("", func(k string) string {
			if k == tc.key {
				return tc.value
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.key) || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("%s=%q: %v, want an error naming the variable and saying %q", tc.key, tc.value, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw-alone") {
			t.Errorf("%s: the error shows the password: %v", tc.key, err)
		}
	}
	p = writeFile(t, t.TempDir(), "[nats]\ntls_first = \"true\"\n")
	if _, err := config.Load(p, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "nats.tls_first") || !strings.Contains(err.Error(), "true or false") {
		t.Errorf("tls_first in quotes: %v", err)
	}
}
