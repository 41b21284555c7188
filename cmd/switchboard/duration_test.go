package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Durations from the environment: an error names the variable that holds
// the wrong value, and a demo flag wins over the environment.
func TestDurationErrorsNameTheirSource(t *testing.T) {
	dsn, _ := dsnIn(t)
	openCatalog(t, dsn)
	register := []string{"register", "--dsn", dsn, "--name", "x", "--type", "w", "--address", "127.0.0.1:1"}
	check := func(args []string, want string) {
		t.Helper()
		code, stdout, stderr := cli(t, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", args, code, stdout, stderr, want)
		}
	}
	// No heartbeat fits a ttl under 20ms (heartbeats are at least 10ms and
	// at most ttl/2): the ttl is named, not discovery.heartbeat_interval.
	for _, ttl := range []string{"1ns", "19ms"} {
		t.Setenv(envTTL, ttl)
		for _, args := range [][]string{{"ls", "--dsn", dsn}, {"demo", "--dsn", dsn}, register} {
			check(args, envTTL+` "`+ttl+`": must be at least 20ms`)
		}
	}
	// demo --ttl replaces the environment's ttl.
	if code, stdout, stderr := cli(t, "demo", "--dsn", "sqlite::memory:", "--ttl", "2s", "--heartbeat", "100ms"); code != 0 || !strings.Contains(stdout, "demo done") {
		t.Errorf("demo --ttl 2s with %s=1ns: exit %d\nstdout:\n%s\nstderr:\n%s", envTTL, code, stdout, stderr)
	}
	// The demo's default ttl (2s) above the configured max_ttl: the
	// max_ttl's variable is named, and what to pass instead.
	t.Setenv(envTTL, "1s")
	t.Setenv("SWITCHBOARD_DISCOVERY_MAX_TTL", "1s")
	check([]string{"demo", "--dsn", dsn}, `SWITCHBOARD_DISCOVERY_MAX_TTL "1s": is below the demo's ttl (2s, the default of --ttl); pass a --ttl of at most 1s`)
	check([]string{"demo", "--dsn", dsn, "--ttl", "1500ms"}, `--ttl "1.5s": must be at most max_ttl (1s)`)
}

// A value from the config file that is refused after loading (an in-memory
// DSN for a command in its own process, a max_ttl below the demo's ttl) is
// named as config.Load names it: the file and its key.
func TestErrorsAfterLoadingNameTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sb.toml")
	if err := os.WriteFile(file, []byte("[discovery]\ndsn = \"sqlite::memory:\"\nttl = \"1s\"\nmax_ttl = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "--config", file}, "config " + file + `: discovery.dsn "sqlite::memory:": an in-memory catalog lives in one process`},
		{[]string{"demo", "--config", file}, "config " + file + `: discovery.max_ttl "1s": is below the demo's ttl (2s, the default of --ttl)`},
		// A flag is named as typed, whatever the file says.
		{[]string{"ls", "--config", file, "--dsn", "sqlite::memory:"}, `--dsn "sqlite::memory:": an in-memory catalog`},
	} {
		code, stdout, stderr := cli(t, tc.args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}
