package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-io/switchboard"
)

// A DSN may list several servers of one catalog: http://h1:7400,h2:7400
// (or https://), with one path prefix, token and TLS settings for all. The
// client sends each request to one server at a time, the current one, and
// stays with it while it answers. A connection error, a request timeout or
// a 5xx answer (and, for WatchStats, an unhealthy /v1/info) moves it to the
// next server at once, within the same request; the failed server is left
// alone for a backoff (serverBackoffMin, doubling to serverBackoffMax) and
// is tried again after it, or sooner when every other server has failed
// too. A host name that resolves to several addresses is several servers
// (resolved at the first request; not when Config.HTTPClient is set, whose
// transport dials by name).

// Backoff of a server that failed: from serverBackoffMin, doubling with
// each failure in a row, to serverBackoffMax.
const (
	serverBackoffMin = 250 * time.Millisecond
	serverBackoffMax = 10 * time.Second
)

// server is one server of a client's DSN.
type server struct {
	base string // scheme://host:port[/prefix], what requests are sent to
	name string // how it is named: base, and the address dialled when a name resolved to several
	http *http.Client

	// Under servers.mu:
	fails     int       // failures in a row
	downUntil time.Time // not tried before this, unless every other server has failed
}

// servers is the list of a client's servers and which one is current.
type servers struct {
	scheme, prefix string
	hosts          []string // host:port as written in the DSN
	// split: a host name resolving to several addresses becomes several
	// servers, each dialling its address through a transport of its own.
	split func(host string) []*server
	one   func(host string) *server

	mu       sync.Mutex
	list     []*server
	resolved bool
	cur      int
}

// parseServers reads a server DSN: scheme://HOST[:PORT][,HOST[:PORT]…][/prefix].
// A host that is empty, not a host, or has a bad port is an error naming
// it.
func parseServers(raw string) (scheme, prefix string, hosts []string, err error) {
	bad := func(reason string) error {
		return switchboard.NewFieldError(switchboard.ErrInvalidDSN, "dsn", switchboard.RedactDSN(raw), reason)
	}
	s, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", nil, bad("want http:// or https://")
	}
	scheme = strings.ToLower(s)
	if scheme != "http" && scheme != "https" {
		return "", "", nil, bad("want http:// or https://")
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	path, extra := tail, ""
	if i := strings.IndexAny(tail, "?#"); i >= 0 {
		path, extra = tail[:i], tail[i+1:]
	}
	if extra != "" {
		return "", "", nil, bad("server DSN takes no query or fragment (the API token comes from SWITCHBOARD_HTTP_TOKEN)")
	}
	if path != "" {
		prefix = strings.TrimSuffix(path, "/")
	}
	for i, h := range strings.Split(authority, ",") {
		if h == "" {
			return "", "", nil, bad(fmt.Sprintf("server %d of the list is empty (a stray comma?)", i+1))
		}
		u, perr := url.Parse(scheme + "://" + h + prefix)
		if perr != nil || u.Host != h || u.User != nil {
			return "", "", nil, bad(fmt.Sprintf("server %q is not HOST or HOST:PORT", h))
		}
		if u.Hostname() == "" {
			return "", "", nil, bad(fmt.Sprintf("server %q has no host, e.g. 127.0.0.1:7400", h))
		}
		if p := u.Port(); p != "" {
			if n, aerr := strconv.Atoi(p); aerr != nil || n < 1 || n > 65535 {
				return "", "", nil, bad(fmt.Sprintf("server %q: port must be a number from 1 to 65535", h))
			}
		}
		hosts = append(hosts, h)
	}
	return scheme, prefix, hosts, nil
}

// resolve fills the list at the first request: each host, and each
// address of a name that resolves to several when split is set.
func (ss *servers) resolve() {
	if ss.resolved {
		return
	}
	ss.resolved = true
	seen := map[string]bool{}
	for _, h := range ss.hosts {
		var add []*server
		if ss.split != nil {
			add = ss.split(h)
		}
		if len(add) == 0 {
			add = []*server{ss.one(h)}
		}
		for _, s := range add {
			if !seen[s.name] {
				seen[s.name] = true
				ss.list = append(ss.list, s)
			}
		}
	}
}

// order is the servers to try a request on: the current one, then the
// others in the DSN's order that are not backing off, then those backing
// off, soonest back first.
func (ss *servers) order() []*server {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.resolve()
	now := time.Now()
	n := len(ss.list)
	out := make([]*server, 0, n)
	var later []*server
	for i := range n {
		s := ss.list[(ss.cur+i)%n]
		if i == 0 || !now.Before(s.downUntil) {
			out = append(out, s)
		} else {
			later = append(later, s)
		}
	}
	slices.SortStableFunc(later, func(a, b *server) int { return a.downUntil.Compare(b.downUntil) })
	return append(out, later...)
}

// several reports whether the DSN names more than one server (after
// resolution).
func (ss *servers) several() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.resolve()
	return len(ss.list) > 1
}

// current is the server requests go to now.
func (ss *servers) current() *server {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.resolve()
	return ss.list[ss.cur]
}

// ok records that s answered: it is current, its backoff over.
func (ss *servers) ok(s *server) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.fails, s.downUntil = 0, time.Time{}
	if i := slices.Index(ss.list, s); i >= 0 {
		ss.cur = i
	}
}

// failed records that s failed: it backs off, and when it was current the
// next server is. It returns the server now current.
func (ss *servers) failed(s *server) *server {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.fails++
	s.downUntil = time.Now().Add(min(serverBackoffMin<<min(s.fails-1, 10), serverBackoffMax))
	if i := slices.Index(ss.list, s); i >= 0 && i == ss.cur {
		ss.cur = (i + 1) % len(ss.list)
	}
	return ss.list[ss.cur]
}

// movesOn reports whether a request that failed with err is tried on the
// next server: the server could not be reached, did not answer in time,
// or answered 5xx. Anything else (a 4xx, a TLS failure, the caller's own
// end) would fail the same way on every server.
func movesOn(err error) bool {
	if err == nil || errors.Is(err, switchboard.ErrClosed) {
		return false
	}
	var api *APIError
	if errors.As(err, &api) {
		return api.Status >= 500
	}
	var late *noAnswerError
	return errors.Is(err, switchboard.ErrUnreachable) || errors.As(err, &late)
}

// lookupHost resolves a server's host name (a variable for tests).
var lookupHost = net.DefaultResolver.LookupHost

// splitter returns the servers of a host name that resolves to several
// addresses, each with a transport of its own dialling its address (the
// URL keeps the name, for TLS and the Host header); nil for an IP address,
// a name with one address, or one that does not resolve (then the name is
// one server, and its dial says what is wrong).
func splitter(scheme, prefix string, base *http.Transport) func(host string) []*server {
	return func(host string) []*server {
		name, port, err := net.SplitHostPort(host)
		if err != nil {
			name, port = strings.Trim(host, "[]"), map[string]string{"http": "80", "https": "443"}[scheme]
		}
		if net.ParseIP(name) != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		addrs, err := lookupHost(ctx, name)
		if err != nil || len(addrs) < 2 {
			return nil
		}
		out := make([]*server, 0, len(addrs))
		for _, a := range addrs {
			addr := net.JoinHostPort(a, port)
			tr := base.Clone()
			var d net.Dialer
			tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			}
			b := scheme + "://" + host + prefix
			out = append(out, &server{base: b, name: b + " (" + addr + ")", http: &http.Client{Transport: tr}})
		}
		return out
	}
}
