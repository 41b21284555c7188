package testkit

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
)

// echoServer answers each connection with what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	return ServeLoopback(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

func roundTrip(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return errors.New("echoed " + string(buf))
	}
	return nil
}

// TestProxyRefuse: Refuse closes the open connections and refuses new ones
// at the TCP level (where CutAll accepts and closes them); Restore listens
// again on the same address.
func TestProxyRefuse(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatal(err)
	}
	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(open, buf); err != nil {
		t.Fatal(err)
	}

	p.Refuse()
	if _, err := open.Read(buf); err == nil {
		t.Fatal("a connection open before Refuse still reads")
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want connection refused", err)
	}

	p.Restore()
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	// CutAll still accepts (and closes at once).
	p.CutAll()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial after CutAll: %v, want accepted", err)
	}
	c.Close()
	p.Restore()
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("after the second Restore: %v", err)
	}
}
