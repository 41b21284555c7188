// Package remote is the catalog of http:// and https:// DSNs: a
// switchboard.Catalog (and Leaser, WatchStatser, TTLDefaulter) that talks
// to a `switchboard serve` server (package httpapi), so Bootstrap, discovery,
// the resolver, election and every CLI command work unchanged against a
// server. Watch runs over Server-Sent Events and resumes after a dropped
// connection with exactly the differences.
//
// A DSN may list several servers of one catalog,
// http://h1:7400,h2:7400,h3:7400 (a host name that resolves to several
// addresses is several servers): requests go to one at a time and move to
// the next when it cannot be reached, does not answer in time or answers
// 5xx; a watch moves with them (see Client.Server).
//
// Link it with a blank import; switchboard.Open then accepts server DSNs:
//
//	import _ "github.com/switchboard-io/switchboard/remote"
//	cat, err := switchboard.Open(ctx, "http://127.0.0.1:7400", switchboard.Options{})
//
// Opened that way, the API token comes from SWITCHBOARD_HTTP_TOKEN (or the
// first line of the file SWITCHBOARD_HTTP_TOKEN_FILE names) and, for
// https, extra trusted CA certificates from the PEM file named by
// SWITCHBOARD_HTTP_CA. Open takes them as a Config.
package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/idgen"
)

// Environment variables read by the registered backend.
const (
	EnvToken     = "SWITCHBOARD_HTTP_TOKEN"
	EnvTokenFile = "SWITCHBOARD_HTTP_TOKEN_FILE"
	EnvCA        = "SWITCHBOARD_HTTP_CA"
)

// ConfigFromEnv is the Config the registered backend opens with: the token
// from EnvToken, else the first line of the file named by EnvTokenFile
// (both set is an error), and the system's CA certificates plus those of
// the PEM file named by EnvCA (when set).
func ConfigFromEnv() (Config, error) {
	cfg := Config{Token: os.Getenv(EnvToken)}
	if f := os.Getenv(EnvTokenFile); f != "" {
		if cfg.Token != "" {
			return Config{}, fmt.Errorf("%s and %s are both set: set the token or its file, not both", EnvToken, EnvTokenFile)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvTokenFile, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if cfg.Token = strings.TrimSpace(line); cfg.Token == "" {
			return Config{}, fmt.Errorf("%s %s: the first line is empty", EnvTokenFile, f)
		}
	}
	if ca := os.Getenv(EnvCA); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvCA, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return Config{}, fmt.Errorf("%s %s: no PEM certificate in it", EnvCA, ca)
		}
		cfg.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return cfg, nil
}

func init() {
	open := func(ctx context.Context, dsn switchboard.DSN, opts switchboard.Options) (switchboard.Catalog, error) {
		cfg, err := ConfigFromEnv()
		if err != nil {
			return nil, err
		}
		cfg.Logger = opts.Logger
		return Open(ctx, dsn.Raw, cfg)
	}
	switchboard.RegisterBackend("http", open)
	switchboard.RegisterBackend("https", open)
}

// DefaultRequestTimeout is Config.RequestTimeout's default.
const DefaultRequestTimeout = 30 * time.Second

// Config tunes a Client. Zero values take the defaults.
type Config struct {
	// Token is sent as "Authorization: Bearer <token>".
	Token string
	// TLS configures https (default: the system's roots).
	TLS *tls.Config
	// HTTPClient replaces the client the catalog makes (then TLS is unused).
	HTTPClient *http.Client
	// Logger receives the client's logs (default slog.Default()).
	Logger *slog.Logger
	// WatchIdleTimeout is how long a watch waits for anything from the
	// server (an event, or the keep-alive it sends every 15 s by default)
	// before it takes the connection for dead and reconnects (default
	// 45 s).
	WatchIdleTimeout time.Duration
	// RequestTimeout bounds each request whose context has no earlier
	// deadline: a server that has not answered it (status, headers and
	// body) within RequestTimeout fails it with an error that names the
	// URL and says so, and is ErrUnavailable. For a watch it bounds each
	// connection's wait for the response headers; the stream itself is
	// bounded by WatchIdleTimeout. Zero: DefaultRequestTimeout (30 s);
	// negative: no bound.
	RequestTimeout time.Duration
}

// Client is a catalog served by a switchboard server. It is safe for
// concurrent use.
type Client struct {
	base   string // the DSN as given
	srv    *servers
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // cancelled by Close: ends watches
	cancel context.CancelFunc
	closed atomic.Bool
	// life orders Close against a watch starting: a watch joins wg under
	// it only while the client is open, so Close's Wait never races an Add.
	life sync.Mutex
	wg   sync.WaitGroup

	// ids generates the ids of registrations made without one, here rather
	// than by the server: their shared prefix keeps this process's rows side
	// by side in a SQLite catalog behind the server (see internal/idgen),
	// where the server renews a window's heartbeats of many clients at once.
	ids idgen.Source

	mu           sync.Mutex
	secrets      map[string]string // id -> secret returned at registration
	leaseSecrets map[string]string // leaseKey -> secret returned by acquire

	watchers atomic.Int64

	// lastStats is what the last /v1/info that answered said, which
	// WatchStats reports (unhealthy) while the server cannot be asked;
	// nil until one has answered.
	lastStats atomic.Pointer[switchboard.WatchStats]

	// serverReaps is when (Unix ns) ReapGrace asks the server again after
	// it said it reaps by itself; zero until it has.
	serverReaps atomic.Int64

	// pause, when set (by tests), replaces a watch's wait of d between
	// reconnections; false: the watch has ended.
	pause func(ctx context.Context, d time.Duration) bool
}

// Open returns a client of the server at rawURL (http://HOST:PORT or
// https://…, optionally with a path prefix), or of several servers of one
// catalog listed in it (http://HOST:PORT,HOST:PORT…/prefix), among which
// it fails over (see Server). It does not contact a server.
func Open(ctx context.Context, rawURL string, cfg Config) (*Client, error) {
	d, err := switchboard.ParseDSN(rawURL)
	if err != nil {
		return nil, err
	}
	if d.Scheme != "http" && d.Scheme != "https" {
		return nil, &switchboard.FieldError{Field: "dsn", Value: rawURL, Reason: "want http:// or https://"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WatchIdleTimeout <= 0 {
		cfg.WatchIdleTimeout = 45 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		tr.WriteBufferSize = writeBuffer
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS
		}
		hc = &http.Client{Transport: tr}
	}
	scheme, prefix, hosts, err := parseServers(d.Raw)
	if err != nil {
		return nil, err
	}
	srv := &servers{scheme: scheme, prefix: prefix, hosts: hosts}
	srv.one = func(h string) *server {
		b := scheme + "://" + h + prefix
		return &server{base: b, name: b, http: hc}
	}
	if tr, ok := hc.Transport.(*http.Transport); ok && cfg.HTTPClient == nil {
		srv.split = splitter(scheme, prefix, tr)
	}
	cctx, cancel := context.WithCancel(context.Background())
	return &Client{
		base: strings.TrimSuffix(rawURL, "/"), srv: srv, cfg: cfg, log: cfg.Logger,
		ctx: cctx, cancel: cancel, secrets: map[string]string{}, leaseSecrets: map[string]string{}, ids: idgen.New(),
	}, nil
}

// Server is the server requests go to now (its URL; with the address it
// dials when its host name resolved to several): the one that answered
// last, or the next one after a failure.
func (c *Client) Server() string { return c.srv.current().name }

// Servers is every server of the DSN, in the order they are tried (a host
// name that resolves to several addresses is several).
func (c *Client) Servers() []string {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	c.srv.resolve()
	out := make([]string, len(c.srv.list))
	for i, s := range c.srv.list {
		out[i] = s.name
	}
	return out
}

func (c *Client) secret(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.secrets[id]
}

// Register implements switchboard.Catalog. Without an id it registers a
// new UUID v4 of this client's (see ids). The server returns a secret for
// the id; this client keeps it for the id's heartbeats, re-registration
// and deregistration.
func (c *Client) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	if c.closed.Load() {
		return switchboard.Instance{}, switchboard.ErrClosed
	}
	// Validated here as every backend does, not only by the server: JSON
	// would carry invalid UTF-8 as U+FFFD, a different value the server
	// would accept (and invalid components JSON could not be sent at all).
	if _, err := switchboard.Normalize(in); err != nil {
		return switchboard.Instance{}, err
	}
	if in.ID == "" {
		in.ID = c.ids.Next()
	}
	body, err := registerBody(in)
	if err != nil {
		return switchboard.Instance{}, err
	}
	var out schema.RegisterResponse
	if err := c.do(ctx, http.MethodPut, "/v1/instances", body, &out, schema.SecretHeader, c.secret(in.ID)); err != nil {
		return switchboard.Instance{}, c.olderServer(ctx, err, body)
	}
	c.mu.Lock()
	c.secrets[out.Instance.ID] = out.Secret
	c.mu.Unlock()
	return out.Instance, nil
}

// outputOnly are the fields of an instance's JSON that a server writes and
// ignores on input.
var outputOnly = []string{"status", "health", "draining", "revision"}

// registerBody is the body of a registration: in's JSON without the fields
// servers ignore on input, and with the default weight sent as its absence
// (the same to every server). A server of a release from before those
// fields refuses any field it does not know, so it would refuse every
// registration; a weight, zone or check the caller set is still sent, and
// such a server refuses it (unknown field) rather than drop it.
func registerBody(in switchboard.Instance) (map[string]json.RawMessage, error) {
	if in.Weight == switchboard.DefaultWeight {
		in.Weight = 0
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range outputOnly {
		delete(m, k)
	}
	return m, nil
}

// writeBuffer is the size of the client's buffer for a request: with the
// transport's default of 4 KiB, a heartbeat of 50 registrations (ids and
// secrets, ~5 KiB) took two write system calls, and a process's share of a
// large fleet is mostly system calls and wake-ups. Up to ~600 ids now go
// out in one.
const writeBuffer = 64 << 10

// heartbeatChunk keeps each request well under the server's 1 MiB limit.
const heartbeatChunk = 2000

// Heartbeat implements switchboard.Catalog: one request per 2,000 ids,
// renewed by the server together with other clients' in one statement. An
// id whose row another client now owns is returned as missing.
func (c *Client) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	if c.closed.Load() {
		return nil, switchboard.ErrClosed
	}
	if err := backend.ValidateHeartbeatIDs(ids); err != nil {
		return nil, err
	}
	var missing []string
	for len(ids) > 0 {
		n := min(len(ids), heartbeatChunk)
		req := schema.HeartbeatRequest{Instances: make([]schema.HeartbeatItem, 0, n)}
		c.mu.Lock()
		for _, id := range ids[:n] {
			req.Instances = append(req.Instances, schema.HeartbeatItem{ID: id, Secret: c.secrets[id]})
		}
		c.mu.Unlock()
		var out schema.HeartbeatResponse
		if err := c.do(ctx, http.MethodPost, "/v1/heartbeats", req, &out); err != nil {
			return nil, err
		}
		missing = append(missing, out.Missing...)
		// An id whose row now belongs to another client (it re-registered
		// the id after this client's registration expired) is this
		// client's registration gone: missing, as for a reaped row. The
		// others were renewed.
		for _, rf := range out.Refused {
			c.log.Warn("switchboard server: heartbeat refused: the row is no longer this client's", "id", rf.ID, "code", rf.Code, "err", rf.Error)
			missing = append(missing, rf.ID)
		}
		ids = ids[n:]
	}
	return missing, nil
}

// Deregister implements switchboard.Catalog.
func (c *Client) Deregister(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "/v1/instances/"+pathID(id), nil, nil, schema.SecretHeader, c.secret(id))
	if err == nil || errors.Is(err, switchboard.ErrNotFound) {
		c.mu.Lock()
		delete(c.secrets, id)
		c.mu.Unlock()
	}
	return err
}

// pathID is id as one segment of a URL path. The ids "." and ".." are
// valid (switchboard.ValidateID) but are dot segments in a path, which
// the server's router resolves ("/v1/instances/.." is "/v1/"): their dots
// are percent-encoded, which the server reads back as the id.
func pathID(id string) string {
	if id == "." || id == ".." {
		return strings.ReplaceAll(id, ".", "%2E")
	}
	return url.PathEscape(id)
}

// Get implements switchboard.Catalog.
func (c *Client) Get(ctx context.Context, id string) (switchboard.Instance, error) {
	var in switchboard.Instance
	err := c.do(ctx, http.MethodGet, "/v1/instances/"+pathID(id), nil, &in)
	return in, err
}

func queryString(q switchboard.Query) string {
	v := url.Values{}
	if q.Name != "" {
		v.Set("name", q.Name)
	}
	if q.Type != "" {
		v.Set("type", q.Type)
	}
	if q.Capability != "" {
		v.Set("capability", q.Capability)
	}
	if q.All {
		v.Set("all", "true")
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// List implements switchboard.Catalog.
func (c *Client) List(ctx context.Context, q switchboard.Query) ([]switchboard.Instance, error) {
	var out []switchboard.Instance
	err := c.do(ctx, http.MethodGet, "/v1/instances"+queryString(q), nil, &out)
	return out, err
}

// Reap implements switchboard.Catalog.
func (c *Client) Reap(ctx context.Context, olderThan time.Duration) (int, error) {
	path := "/v1/reap"
	if olderThan != 0 { // a negative age: the server says it is invalid
		path += "?older_than=" + url.QueryEscape(olderThan.String())
	}
	var out schema.ReapResponse
	err := c.do(ctx, http.MethodPost, path, nil, &out)
	return out.Reaped, err
}

// ReapGrace implements switchboard.GraceReaper: the server reaps the rows
// stale for twice their TTL whose TTL is at most reachableFor and at most
// how long it has itself been reachable to the catalog, in one request; no
// row is sent to this client. (A server older than this client ignores
// reachable_for and reaps without a grace.)
//
// It is what a Bootstrap's reaper calls, every few seconds in every
// process. A server that runs its own reaper says so in its answer
// (reaps_every); for leaveReaps after such an answer ReapGrace leaves
// reaping to the server and returns 0 without a request. 200 clients that
// reap every 5 s then send the server about 3 reap requests a second
// between them instead of 40, and a server whose reaper was turned off is
// reaped by its clients again within leaveReaps.
func (c *Client) ReapGrace(ctx context.Context, reachableFor time.Duration) (int, error) {
	if reachableFor < 0 {
		return 0, &switchboard.FieldError{Field: "reachableFor", Value: reachableFor.String(), Reason: "must not be negative"}
	}
	if reachableFor < time.Millisecond {
		return 0, nil // no TTL is shorter: nothing is outside its grace
	}
	if time.Now().UnixNano() < c.serverReaps.Load() {
		return 0, nil
	}
	var out schema.ReapResponse
	err := c.do(ctx, http.MethodPost, "/v1/reap?reachable_for="+url.QueryEscape(reachableFor.String()), nil, &out)
	if err == nil && out.ReapsEvery != "" {
		if every, perr := time.ParseDuration(out.ReapsEvery); perr == nil && every > 0 {
			c.serverReaps.Store(time.Now().Add(leaveReaps).UnixNano())
		}
	}
	return out.Reaped, err
}

// leaveReaps is how long a client leaves reaping to a server that said it
// reaps by itself.
const leaveReaps = time.Minute

// Now implements switchboard.Catalog: the catalog's clock, read through
// the server.
func (c *Client) Now(ctx context.Context) (time.Time, error) {
	var out schema.NowResponse
	err := c.do(ctx, http.MethodGet, "/v1/now", nil, &out)
	return out.Now, err
}

// Close implements switchboard.Catalog: it ends every watch of this client.
// Registrations are not deregistered (Bootstrap's Close does that).
func (c *Client) Close() error {
	c.life.Lock()
	already := c.closed.Swap(true)
	c.life.Unlock()
	if already {
		return nil
	}
	c.cancel()
	c.wg.Wait()
	if c.cfg.HTTPClient == nil {
		c.srv.mu.Lock()
		for _, s := range c.srv.list {
			if tr, ok := s.http.Transport.(*http.Transport); ok {
				tr.CloseIdleConnections()
			}
		}
		c.srv.mu.Unlock()
	}
	return nil
}

// WatchStats implements switchboard.WatchStatser from the server's
// /v1/info (a request bounded to 2 s); Watchers counts this client's
// watches and Server names the server that answered. A server that says
// it is unhealthy, when the DSN lists others, is left for the next as a
// failed request is, and the first healthy answer is reported (else the
// last). When no server answers, it reports the counts of the last answer
// (zero before any), unhealthy, with the request's error: a collector then
// shows the server unreachable, not its instances gone.
func (c *Client) WatchStats() switchboard.WatchStats {
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
	defer cancel()
	var info schema.Info
	var s *server
	var err error
	for range len(c.srv.order()) {
		info = schema.Info{}
		s, err = c.doOn(ctx, http.MethodGet, "/v1/info", nil, &info, nil)
		if err != nil || info.Healthy || !c.srv.several() {
			break
		}
		next := c.srv.failed(s)
		c.log.Debug("switchboard server: unhealthy; trying the next server", "server", s.name, "next", next.name, "err", info.Error)
	}
	if err != nil {
		var st switchboard.WatchStats
		if last := c.lastStats.Load(); last != nil {
			st = *last
		}
		st.Watchers = int(c.watchers.Load())
		st.Healthy, st.LastError = false, err
		st.Server = c.srv.current().name
		return st
	}
	st := switchboard.WatchStats{Watchers: int(c.watchers.Load()), Server: s.name}
	st.Instances = info.Instances.Active + info.Instances.Stale
	st.Active = info.Instances.Active
	st.Healthy = info.Healthy
	if info.Error != "" {
		st.LastError = errors.New(info.Error)
	}
	if sp := info.SelfPreservation; sp != nil {
		st.Preserving, st.HeldExpirations, st.SelfPreservationEvents = sp.Active, sp.HeldExpirations, sp.Events
	}
	last := st // its LastError is replaced when it is reported
	c.lastStats.Store(&last)
	return st
}

// DefaultTTL implements switchboard.TTLDefaulter: the TTL the server's
// catalog gives an instance registered without one, as the server's
// /v1/info says it (default_ttl; a request bounded to 2 s, asked anew at
// each call, so a restarted server's new default counts). It is zero when
// the server does not say — a server older than this client, or one whose
// catalog does not tell — or cannot be asked: Bootstrap then checks the
// heartbeat interval against the TTL the server stores, after the write,
// as it does with a catalog that does not tell.
func (c *Client) DefaultTTL() time.Duration {
	info, s, err := c.info(c.ctx)
	if err != nil || info.DefaultTTL == "" {
		return 0
	}
	d, err := time.ParseDuration(info.DefaultTTL)
	if err != nil || d <= 0 {
		c.log.Warn("switchboard server: /v1/info has a default_ttl that is not a positive duration: taken as not said",
			"server", s.name, "default_ttl", info.DefaultTTL)
		return 0
	}
	return d
}

// info is the server's /v1/info, asked within 2 s, and the server that
// answered.
func (c *Client) info(ctx context.Context) (schema.Info, *server, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var info schema.Info
	s, err := c.doOn(ctx, http.MethodGet, "/v1/info", nil, &info, nil)
	return info, s, err
}

var (
	_ switchboard.Catalog      = (*Client)(nil)
	_ switchboard.Leaser       = (*Client)(nil)
	_ switchboard.WatchStatser = (*Client)(nil)
	_ switchboard.TTLDefaulter = (*Client)(nil)
)
