//go:build unix

package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A register whose catalog's write lock another process holds forever (a
// stopped process) gives up after the busy timeout with a clear error and
// exit 1, instead of hanging.
func TestRegisterGivesUpOnAHeldWriteLock(t *testing.T) {
	dsn, path := dsnIn(t)
	openCatalog(t, dsn)
	f, err := os.OpenFile(path+"-wlock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// This test process is the other process: it holds the lock throughout.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	p := start(t, "register", "--dsn", dsn, "--name", "svc", "--type", "writer", "--address", "127.0.0.1:1")
	var exit error
	select {
	case <-func() chan struct{} {
		done := make(chan struct{})
		go func() { exit = p.wait(t); close(done) }()
		return done
	}():
	case <-time.After(60 * time.Second):
		t.Fatal("register hung on a held write lock")
	}
	var ee interface{ ExitCode() int }
	if ok := asExit(exit, &ee); !ok || ee.ExitCode() != 1 || !strings.Contains(p.stderr.String(), "gave up after waiting") ||
		!strings.Contains(p.stderr.String(), "another process holds it") {
		t.Fatalf("exit %v, stderr %q", exit, p.stderr)
	}
}

func asExit(err error, target *interface{ ExitCode() int }) bool {
	e, ok := err.(interface{ ExitCode() int })
	if ok {
		*target = e
	}
	return ok
}
