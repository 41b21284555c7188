package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Versions, metadata and lease names and holders are free text that other
// processes write into the catalog. The table formats of ls and leases
// show them escaped, so a registration cannot send escape sequences to an
// operator's terminal (here: set its title, clear the screen, reverse the
// text) or break a table's lines and columns.
func TestTablesEscapeControlCharacters(t *testing.T) {
	dsn, _ := dsnIn(t)
	cat := openCatalog(t, dsn)
	ctx := context.Background()
	if _, err := cat.Register(ctx, switchboard.Instance{ID: "evil-1", Name: "evil", Type: "writer", Address: "127.0.0.1:1",
		Version: "1.0\x1b]0;pwned\x07\t\u202e", Metadata: map[string]string{"note\x1b[2J": "line1\nline2\tcol\u009b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.(switchboard.Leaser).Acquire(ctx, "lock\x1b[31m", "pod\r\nforged-row", time.Minute); err != nil {
		t.Fatal(err)
	}
	clean := func(what, out string, lines int) {
		t.Helper()
		for _, r := range out {
			if r != '\n' && unprintable(r) {
				t.Fatalf("%s: control character %q in the output:\n%q", what, r, out)
			}
		}
		if n := strings.Count(out, "\n"); n != lines {
			t.Fatalf("%s: %d lines, want %d:\n%s", what, n, lines, out)
		}
	}
	for _, format := range []string{"table", "wide"} {
		code, out, stderr := cli(t, "ls", "--dsn", dsn, "-o", format)
		if code != 0 {
			t.Fatalf("ls -o %s: exit %d %s", format, code, stderr)
		}
		clean("ls -o "+format, out, 2)
		if !strings.Contains(out, `1.0\x1b]0;pwned\a\t\u202e`) {
			t.Errorf("ls -o %s: version not shown escaped:\n%s", format, out)
		}
		if format == "wide" && !strings.Contains(out, `note\x1b[2J=line1\nline2\tcol\u009b`) {
			t.Errorf("ls -o wide: metadata not shown escaped:\n%s", out)
		}
		code, out, stderr = cli(t, "leases", "--dsn", dsn, "-o", format)
		if code != 0 {
			t.Fatalf("leases -o %s: exit %d %s", format, code, stderr)
		}
		clean("leases -o "+format, out, 2)
		if !strings.Contains(out, `lock\x1b[31m`) || !strings.Contains(out, `pod\r\nforged-row`) {
			t.Errorf("leases -o %s: name or holder not shown escaped:\n%s", format, out)
		}
	}
	// The json formats keep the values as stored.
	code, out, _ := cli(t, "ls", "--dsn", dsn, "--json")
	if code != 0 || !strings.Contains(out, `1.0\u001b]0;pwned\u0007\t`) {
		t.Errorf("ls --json: exit %d %s", code, out)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"":              "",
		"plain 1.0 ü":   "plain 1.0 ü",
		"a\x00b\x7fc":   `a\x00b\x7fc`,
		"\u2066x\u2069": `\u2066x\u2069`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
