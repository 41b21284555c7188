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

// send checks its tracing environment before it opens the catalog: a bad
// OTEL_TRACES_EXPORTER exits 2 and leaves no new SQLite file behind, as
// echo does.
func TestSendBadTracingEnvCreatesNothing(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		dsn, path := dsnIn(t)
		t.Setenv("OTEL_TRACES_EXPORTER", "otlp,console")
		args := []string{"send", "--dsn", dsn, "--to", "flow.echo.node:in", "--data", "hi"}
		if verbose {
			args = append(args, "--verbose")
		}
		code, stdout, stderr := cli(t, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, `exporter "console" is not supported`) ||
			!strings.HasSuffix(stderr, "; run 'switchboard send --help'\n") {
			t.Errorf("verbose %t: exit %d, stdout %q, stderr %q; want exit 2 and one line naming \"console\"", verbose, code, stdout, stderr)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("verbose %t: an invalid tracing environment created the catalog file: %v", verbose, err)
		}
	}
}
