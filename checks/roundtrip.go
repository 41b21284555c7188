package checks

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxHeaderBytes bounds an HTTP probe's response headers.
const maxHeaderBytes = 64 << 10

// oneShot is the probes' http.RoundTripper: each request on a connection
// of its own, written and read by the calling goroutine (net/http's
// request writer and response reader), and closed with the body. A probe
// is one request: http.Transport's pool, its dialing goroutine and the
// reader and writer goroutines of every connection cost a server running
// thousands of checks wake-ups and CPU for nothing. http.Client still
// follows the redirects (CheckRedirect). HTTP/1.1 only, no proxy.
type oneShot struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	tls  *tls.Config
}

func (o *oneShot) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close() // probes send none
	}
	ctx := req.Context()
	host := req.URL.Host
	if req.URL.Port() == "" {
		port := "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(req.URL.Hostname(), port)
	}
	conn, err := o.dial(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	// The context's end (its deadline or a cancel) ends the exchange
	// wherever it is, by a deadline in the past: the context's error is
	// then set before any read or write fails, and says why.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	switch req.URL.Scheme {
	case "http":
	case "https":
		cfg := o.tls.Clone()
		cfg.ServerName = req.URL.Hostname()
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(err)
		}
		conn = tc
	default:
		return fail(fmt.Errorf("unsupported protocol scheme %q", req.URL.Scheme))
	}
	out := req.Clone(ctx)
	out.Close = true // "Connection: close": one request per connection
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(conn)
	err = out.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writers.Put(bw)
	if err != nil {
		return fail(err)
	}
	lim := &headerLimit{r: conn, left: maxHeaderBytes}
	br := readers.Get().(*bufio.Reader)
	br.Reset(lim)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		br.Reset(nil)
		readers.Put(br)
		if lim.left <= 0 {
			err = fmt.Errorf("response headers over %d bytes", maxHeaderBytes)
		}
		return fail(err)
	}
	// The prober reads MaxBody bytes of the body at most; this bounds what
	// the connection yields for them, chunk framing and all.
	lim.left = maxHeaderBytes
	resp.Body = &closeConn{ReadCloser: resp.Body, conn: conn, br: br, stop: stop}
	return resp, nil
}

// The buffers of the probes' requests and responses, reused: a thousand
// probes a second would otherwise allocate 8 MB a second of them.
var (
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
)

// headerLimit reads from r until left bytes have been read, then ends
// like a closed connection.
type headerLimit struct {
	r    io.Reader
	left int
}

func (l *headerLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= n
	return n, err
}

// closeConn is a response body that closes its connection and gives
// back the buffer it was read through.
type closeConn struct {
	io.ReadCloser
	conn net.Conn
	br   *bufio.Reader
	stop func() bool
	once sync.Once
}

func (c *closeConn) Close() error {
	c.once.Do(func() {
		c.stop()
		c.ReadCloser.Close()
		c.conn.Close()
		c.br.Reset(nil)
		readers.Put(c.br)
	})
	return nil
}
