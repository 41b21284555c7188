// Package testkit holds the helpers the project's tests share: waiting for
// a condition with a generous bound (a hang fails, slowness does not), a
// SQLite catalog on a temporary file, a goroutine-safe buffer, a listener
// that counts connections, loopback servers of raw connections, a TCP
// proxy that can cut its connections, and the checks the SQL backends'
// tests share.
// Only tests import it.
package testkit

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// WaitUntil polls cond every few milliseconds and fails the test when it
// has not held within 20 s: it catches what never happens without
// asserting how fast anything is.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// OpenSQLite opens a catalog on a new SQLite file in t.TempDir(), closed at
// cleanup. The test binary must link the backend (import
// github.com/switchboard-io/switchboard/sqlite).
func OpenSQLite(t testing.TB) switchboard.Catalog {
	t.Helper()
	cat, err := switchboard.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "catalog.db"),
		switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers (a
// log or output sink a test reads while something writes to it).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Serve accepts connections on ln until it is closed, each handled by
// handle on a goroutine of its own and closed when handle returns.
func Serve(ln net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// ServeLoopback listens on a loopback port, closed when the test ends,
// serves it with handle (Serve), and returns its address.
func ServeLoopback(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	Serve(ln, handle)
	return ln.Addr().String()
}

// CountingListener counts the connections it accepts and those still open.
type CountingListener struct {
	net.Listener
	Accepted atomic.Int64
	Open     atomic.Int64
}

// Listen returns a CountingListener on 127.0.0.1:0.
func Listen(t testing.TB) *CountingListener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &CountingListener{Listener: lis}
}

// Accept accepts and counts a connection.
func (l *CountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.Accepted.Add(1)
	l.Open.Add(1)
	return &trackedConn{Conn: c, l: l}, nil
}

type trackedConn struct {
	net.Conn
	l    *CountingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.l.Open.Add(-1) })
	return c.Conn.Close()
}

// RestoreSQLite puts the backup file over the SQLite catalog at path by the
// restore procedure of docs/operations.md: a copy next to the catalog, the WAL and
// shared-memory files removed, the copy renamed over the catalog.
func RestoreSQLite(t testing.TB, backup, path string) {
	t.Helper()
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".restore", data, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	if err := os.Rename(path+".restore", path); err != nil {
		t.Fatal(err)
	}
}
