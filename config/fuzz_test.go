package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/switchboard-io/switchboard/config"
)

// FuzzLoad: any file content either loads into a configuration that
// validates, or is an error; never a panic.
func FuzzLoad(f *testing.F) {
	f.Add("[discovery]\ndsn = \"sqlite://x.db\"\nttl = \"10s\"\nheartbeat_interval = \"3s\"\nmax_ttl = \"1h\"\n")
	f.Add("[discovery]\nttl = \"2h\"\n")
	f.Add("[http]\nlisten = \"127.0.0.1:7400\"\n[transport]\ntls_cert = \"c\"\ntls_key = \"k\"\n")
	f.Add("[discovery\n")
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(t.TempDir(), "switchboard.toml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(path, func(string) string { return "" })
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load returned a configuration that does not validate: %v", err)
		}
		if c.Discovery.TTL > c.Discovery.MaxTTL || 2*c.Discovery.HeartbeatInterval > c.Discovery.TTL+1 {
			t.Fatalf("limits not enforced: %+v", c.Discovery)
		}
	})
}
