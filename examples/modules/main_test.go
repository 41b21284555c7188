package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestModules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, "sqlite://"+filepath.Join(t.TempDir(), "catalog.db"), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(out.String(), "ADDR")
	want := "ping: serving on ADDR\n" +
		"pong: serving on ADDR\n" +
		"ping: node log got \"pong got hello\" (from demo.pong.upper:out, depth 1)\n" +
		"ping: pong answered \"HELLO\"\n"
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}
