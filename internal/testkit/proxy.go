package testkit

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server and can cut them all and
// refuse new ones (closing each at once) until restored: a network outage
// between one process and its database or server. It can also stop
// listening, so that new connections are refused as by a server that is
// down (Refuse), or freeze them: drop whatever either side sends and keep
// them open, as a peer gone behind a NAT or a firewall does (nothing
// arrives, nothing fails).
type Proxy struct {
	t      testing.TB
	addr   string
	target string

	mu     sync.Mutex
	ln     net.Listener // nil while refusing (and once closed)
	closed bool
	cut    bool
	frozen bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewProxy listens on 127.0.0.1:0 and forwards to target; it is closed at
// cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, addr: ln.Addr().String(), ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept(ln)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		frozen := p.frozen
		p.mu.Unlock()
		if n > 0 && !frozen {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// CutAll closes every proxied connection and refuses new ones.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Freeze drops whatever either side of every connection sends from now on,
// new connections included, and keeps them open.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// Refuse closes every proxied connection, as CutAll does, and stops
// listening: a new connection is refused (ECONNREFUSED), as by a server
// that is down, where after CutAll it is accepted and closed at once (which
// some clients retry as a dropped connection). Restore listens again on the
// same address.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// Restore accepts and forwards connections again (listening again on the
// same address after Refuse); those that lost data while frozen are closed.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	if p.ln == nil && !p.closed {
		if ln, err := net.Listen("tcp", p.addr); err != nil {
			p.t.Errorf("testkit: proxy: listen again on %s: %v", p.addr, err)
		} else {
			p.ln = ln
			p.wg.Add(1)
			go p.accept(ln)
		}
	}
	if p.frozen {
		p.frozen = false
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.CutAll()
	p.wg.Wait()
}
