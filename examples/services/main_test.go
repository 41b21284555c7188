package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, "sqlite://"+filepath.Join(t.TempDir(), "catalog.db"), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := "quotes: registered\n" +
		"web: found quotes (api) and called it: Simplicity is prerequisite for reliability.\n" +
		"quotes: deregistered\n" +
		"web: no instance serves quotes any more\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
