package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFileTokenReachesServer: one switchboard.toml holds the
// server's DSN and [http] token; `serve` requires the token, and the client
// commands reading the same file send it (no SWITCHBOARD_HTTP_TOKEN set).
// The environment variable still wins over the file.
func TestConfigFileTokenReachesServer(t *testing.T) {
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "")
	dsn, _ := dsnIn(t)
	dir := t.TempDir()
	serverFile := filepath.Join(dir, "server.toml")
	os.WriteFile(serverFile, []byte("[discovery]\ndsn = \""+dsn+"\"\n[http]\ntoken = \"file-token\"\n"), 0o600)
	_, url := serveProc(t, "--config", serverFile)
	clientFile := filepath.Join(dir, "client.toml")
	os.WriteFile(clientFile, []byte("[discovery]\ndsn = \""+url+"\"\n[http]\ntoken = \"file-token\"\n"), 0o600)
	if code, stdout, stderr := cli(t, "ls", "--config", clientFile, "--json"); code != 0 || stdout != "[]\n" {
		t.Fatalf("ls with the file's token: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	p := start(t, "register", "--config", clientFile, "--name", "tok", "--type", "w", "--address", "127.0.0.1:1")
	p.line(t)
	if code, stdout, stderr := cli(t, "ls", "--config", clientFile); code != 0 || !strings.Contains(stdout, "tok") {
		t.Fatalf("ls after register with the file's token: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "env-token")
	if code, _, stderr := cli(t, "ls", "--config", clientFile); code != 1 || !strings.Contains(stderr, "wrong API token") {
		t.Fatalf("the environment's token should win over the file's: exit %d stderr %q", code, stderr)
	}
}
