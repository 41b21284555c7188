package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

func TestStatementsArePreparedAfterFirstUse(t *testing.T) {
	ctx := context.Background()
	c, err := Open(ctx, switchboard.DSN{Scheme: "sqlite", Path: filepath.Join(t.TempDir(), "s.db")}, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := switchboard.Instance{ID: "a1", Name: "a", Type: "w", Address: "127.0.0.1:1", TTL: time.Minute}
	for i := 0; i < 3; i++ {
		in.Version = string(rune('1' + i)) // a real change each time
		if _, err := c.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	c.d.wstmts.mu.Lock()
	n := len(c.d.wstmts.m)
	var scripts int
	for q := range c.d.wstmts.m {
		for _, m := range migrations {
			if q == m {
				scripts++
			}
		}
	}
	c.d.wstmts.mu.Unlock()
	if n == 0 {
		t.Fatal("no write statement was prepared after repeated registrations")
	}
	if scripts != 0 {
		t.Fatalf("%d migration scripts were cached as prepared statements", scripts)
	}
	got, err := c.List(ctx, switchboard.Query{Name: "a"})
	if err != nil || len(got) != 1 || got[0].Version != "3" {
		t.Fatalf("after prepared writes: %+v %v", got, err)
	}
}
