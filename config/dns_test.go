package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

// The [dns] keys: off by default, read from the file and the environment,
// and every wrong value refused naming its key.
func TestDNSSection(t *testing.T) {
	c, err := config.Load("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.DNS.Listen != "" || c.DNS.Domain != "switchboard" || c.DNS.TTL != 0 || c.DNS.MaxRecords != 3 {
		t.Errorf("defaults: %+v", c.DNS)
	}
	p := writeFile(t, t.TempDir(), "[dns]\nlisten = \"127.0.0.1:8600\"\ndomain = \"sd.example.\"\nttl = 5\nmax_records = 5\n")
	c, err = config.Load(p, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.DNS != (config.DNS{Listen: "127.0.0.1:8600", Domain: "sd.example.", TTL: 5, MaxRecords: 5}) {
		t.Errorf("from the file: %+v", c.DNS)
	}
	env := map[string]string{"SWITCHBOARD_DNS_LISTEN": ":53", "SWITCHBOARD_DNS_DOMAIN": "consul"}
	c, err = config.Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.DNS.Listen != ":53" || c.DNS.Domain != "consul" {
		t.Errorf("from the environment: %+v", c.DNS)
	}
	for _, tc := range []struct{ key, value, want string }{
		{"SWITCHBOARD_DNS_LISTEN", "8600", "SWITCHBOARD_DNS_LISTEN"},
		{"SWITCHBOARD_DNS_DOMAIN", "bad_label", "letters, digits"},
		{"SWITCHBOARD_DNS_DOMAIN", "a..b", "1 to 63"},
		{"SWITCHBOARD_DNS_DOMAIN", "-a", "begin or end"},
		{"SWITCHBOARD_DNS_DOMAIN", ".", "empty"},
		{"SWITCHBOARD_DNS_DOMAIN", strings.Repeat("a.", 127) + "a", "253"},
		{"SWITCHBOARD_DNS_TTL", "-1", "0 to 604800"},
		{"SWITCHBOARD_DNS_TTL", "5s", "whole number"},
		{"SWITCHBOARD_DNS_TTL", "604801", "0 to 604800"},
		{"SWITCHBOARD_DNS_MAX_RECORDS", "0", "at least 1"},
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
	}
}
