package remote_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/remote"
)

// TestConfigFromEnvTokenFile: the token comes from the first line of the
// file SWITCHBOARD_HTTP_TOKEN_FILE names; with the token set too, or an
// empty or missing file, ConfigFromEnv says what is wrong.
func TestConfigFromEnvTokenFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "tok")
	os.WriteFile(f, []byte("  the-token \nsecond line\n"), 0o600)
	t.Setenv(remote.EnvToken, "")
	t.Setenv(remote.EnvTokenFile, f)
	cfg, err := remote.ConfigFromEnv()
	if err != nil || cfg.Token != "the-token" {
		t.Fatalf("token from the file: %q %v", cfg.Token, err)
	}
	t.Setenv(remote.EnvToken, "x")
	if _, err := remote.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("both set: %v", err)
	}
	t.Setenv(remote.EnvToken, "")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	for _, p := range []string{empty, filepath.Join(dir, "missing")} {
		t.Setenv(remote.EnvTokenFile, p)
		if _, err := remote.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), remote.EnvTokenFile) {
			t.Fatalf("token file %s: %v", p, err)
		}
	}
}
