package main

import (
	"crypto/tls"
	"fmt"
	"net"
)

// aeadSuites are the TLS 1.2 cipher suites serve accepts: ECDHE with AEAD
// ciphers only (AES-GCM, ChaCha20-Poly1305), none with CBC or SHA-1. TLS
// 1.3, preferred, has only AEAD suites of its own.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// loopbackOnly reports whether addr is a loopback address (not one of
// every interface, nor another host's).
func loopbackOnly(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// warnOpen warns, on stderr and in the log, that a server without a token
// listens beyond loopback: anyone who reaches addr may register, renew and
// reap by age.
func warnOpen(g *globals, addr net.Addr) {
	fmt.Fprintf(g.stderr, "\n"+
		"WARNING: switchboard serve listens on %s WITHOUT A TOKEN.\n"+
		"WARNING: anyone who can reach it may register, heartbeat, take leases and reap by age.\n"+
		"WARNING: set http.token_file (--token-file) and http.admin_token_file, or listen on 127.0.0.1.\n\n", addr)
	g.log.Warn("serve: listening beyond loopback without a token: anyone who reaches it may write to the catalog; set http.token_file",
		"listen", addr.String())
}
