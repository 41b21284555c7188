package main

import (
	"os"
	"strings"
	"testing"
)

// An OTEL_TRACES_EXPORTER list with an exporter the program lacks is
// invalid input: exit 2, one line naming the entry, nothing created.
func TestTracesExporterListErrorNamesEntry(t *testing.T) {
	dsn, path := dsnIn(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp,console")
	code, stdout, stderr := cli(t, "echo", "--dsn", dsn, "--name", "echo")
	if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, `exporter "console" is not supported`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line naming \"console\"", code, stdout, stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("invalid tracing environment created the catalog file: %v", err)
	}
}
