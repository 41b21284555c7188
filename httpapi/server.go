package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-io/switchboard"
)

// MaxBody is the largest request body accepted (413 above it).
const MaxBody = 1 << 20

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// CheckPolicy, when set, judges the check of every registration that
	// carries one before anything is stored (a check is a request the
	// server's runners make on the registrant's behalf): an error is the
	// answer (400 for a switchboard.FieldError). serve passes the policy of
	// [checks] allow.
	CheckPolicy func(switchboard.Instance) error
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every /v1/ request and on /metrics (401 without it, 403 when wrong).
	// /healthz and the UI are open, but /healthz says why the catalog
	// failed only to a request that carries the token.
	Token string
	// Tokens are further client tokens, each accepted wherever Token is:
	// a client credential of its own, so that the per-token quotas
	// (MaxInstancesPerToken, …) bound each client, or tenant, that holds
	// one. Empty ones are ignored.
	Tokens []string
	// AdminToken, when set, is the credential of the administrator: it
	// is accepted wherever Token is, and it alone may reap live rows
	// (older_than below twice the longest TTL), delete another client's
	// row without its secret, and release another holder's lease (it
	// renews nobody's rows or leases). With neither token set, the server answers
	// only IP and loopback Host names (AllowedHosts besides) and any
	// caller may reap by age, but nobody is the administrator; with Token
	// alone, nobody is either.
	AdminToken string
	// AllowedHosts are the host names (without port) answered besides the
	// loopback ones when no token is set: any other Host header is
	// refused with 403, so a page whose DNS name was rebound to this
	// server cannot use it. With a token set, every Host is answered.
	AllowedHosts []string
	// MaxLeaseTTL is the longest TTL a lease may be taken or renewed for
	// (default 1 h; 400 above).
	MaxLeaseTTL time.Duration
	// MaxInstances, MaxLeases and MaxWatchers are the server's global
	// quotas: registrations of a new id beyond MaxInstances rows (default
	// 100,000), acquisitions of a new lease name beyond MaxLeases rows
	// (default 10,000), and watch streams beyond MaxWatchers open ones
	// (default 1,000) are answered 429 with Retry-After.
	// MaxWatchersPerClient bounds the open watch streams of one client
	// (its bearer token's role and its IP address; default 64).
	MaxInstances         int
	MaxLeases            int
	MaxWatchers          int
	MaxWatchersPerClient int
	// MaxInstancesPerToken, MaxLeasesPerToken and MaxWatchersPerToken are
	// the quotas of one credential (credential.go): the client token a
	// request carries, or its IP address when it carries none. Above
	// them a registration that would make the credential own one more
	// live instance, an acquisition that would make it hold one more
	// lease, and a watch stream beyond its open ones are answered 429
	// with Retry-After. Zero (the default) is no such quota: only the
	// global ones apply. The admin token is exempt. Instances and leases
	// count to the credential that registered or took them, as stored
	// with them, on every server sharing the catalog and across
	// restarts; watch streams are counted by each server.
	MaxInstancesPerToken int
	MaxLeasesPerToken    int
	MaxWatchersPerToken  int
	// MaxInstanceBytes bounds the memory of the instances the server's
	// mirror holds (their JSON and decoded form, counted from above;
	// default 512 MiB): a registration is answered 429 when its body would
	// take them past it, so a client registering thousands of large
	// documents cannot exhaust the server's memory.
	MaxInstanceBytes int64
	// UI, when set, is served at / (the live dashboard).
	UI http.Handler
	// DSN is the catalog's DSN, reported by /v1/info with its password
	// redacted.
	DSN string
	// Version is the server's release, reported by /v1/info (serve passes
	// its `switchboard version` line): a client that sent a field this
	// server does not know names it in its error.
	Version string
	// HeartbeatWindow is how long the server gathers heartbeats from all
	// clients before renewing them in one statement (default 250 ms). While
	// a renewal is in flight, the next ones gather anyway. A renewal waits
	// at most this long, far inside any TTL; what it saves is statements:
	// on SQLite each one rewrites (in the WAL) every page holding a renewed
	// row, so 200 clients × 50 renewed every second cost the server 0.6
	// cores with 20 statements a second and far less with 4.
	HeartbeatWindow time.Duration
	// ReapInterval is how often the server reaps rows stale for twice their
	// TTL (default 10 s; negative disables the server's reaper).
	ReapInterval time.Duration
	// History is how many watch events the server keeps for resuming SSE
	// streams with Last-Event-ID (default 10,000).
	History int
	// HistoryBytes bounds the same history by the bytes of the instances
	// its events hold (default 64 MiB): a client re-registering one large
	// instance over and over makes the server keep fewer events, not more
	// memory. The newest event is kept whatever its size.
	HistoryBytes int64
	// KeepAlive is the period of SSE keep-alive comments (default 15 s).
	KeepAlive time.Duration
	// WriteTimeout bounds one write to an SSE subscriber; a subscriber that
	// reads nothing for that long is disconnected (default 30 s). Any
	// other answer must be written within it too, from its first byte.
	WriteTimeout time.Duration
	// BodyTimeout bounds reading one request body; a client that has not
	// sent its whole body by then is answered 400 and disconnected
	// (default 30 s). An http.Server's ReadTimeout cannot do it here: it
	// would also end every SSE stream.
	BodyTimeout time.Duration
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.HeartbeatWindow <= 0 {
		o.HeartbeatWindow = 250 * time.Millisecond
	}
	if o.ReapInterval == 0 {
		o.ReapInterval = 10 * time.Second
	}
	if o.History <= 0 {
		o.History = 10000
	}
	if o.MaxLeaseTTL <= 0 {
		o.MaxLeaseTTL = time.Hour
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = 100000
	}
	if o.MaxInstanceBytes <= 0 {
		o.MaxInstanceBytes = 512 << 20
	}
	if o.MaxLeases <= 0 {
		o.MaxLeases = 10000
	}
	if o.MaxWatchers <= 0 {
		o.MaxWatchers = 1000
	}
	if o.MaxWatchersPerClient <= 0 {
		o.MaxWatchersPerClient = 64
	}
	o.MaxInstancesPerToken = max(o.MaxInstancesPerToken, 0)
	o.MaxLeasesPerToken = max(o.MaxLeasesPerToken, 0)
	o.MaxWatchersPerToken = max(o.MaxWatchersPerToken, 0)
	if o.HistoryBytes <= 0 {
		o.HistoryBytes = 64 << 20
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Server is the HTTP API over one catalog handle. It is an http.Handler;
// Close stops its background work (the mirror, the heartbeat batcher, the
// reaper) and ends open watch streams. It does not close the catalog.
type Server struct {
	cat     switchboard.Catalog
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	feed    *feed
	beats   *batcher
	metrics *serverMetrics
	cop     *http.CrossOriginProtection
	streams *streamQuota
	tokens  []string   // the client tokens: Token, then Tokens (none empty)
	tags    *tokenTags // their credentials' tags
	regs    inflight   // registrations past their per-credential quota check
	takes   inflight   // lease acquisitions past theirs
	cancel  context.CancelFunc
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	reapMu  sync.Mutex    // one reap at a time: concurrent requests wait for it
	reaped  time.Time     // when the last default reap (2 × TTL) finished
	reach   time.Duration // the grace it reaped with
}

// reapCoalesce is how long after a default reap (older_than zero) another
// one that could delete no more is answered with 0 at once: every client's
// Bootstrap runs a reaper, and 300 clients would otherwise cost the
// database 60 reaps a second.
const reapCoalesce = time.Second

// reap runs one reap at a time. A default one (older zero) deletes the rows
// stale for twice their TTL with the post-outage grace (switchboard.
// ReapGrace): each row only once this server has been reachable to the
// catalog for that row's TTL, and the caller too when it says for how long
// (reachable; negative: not said). One within reapCoalesce of the previous
// default reap, with no longer a grace, is skipped (it would find what that
// one just deleted: nothing).
func (s *Server) reap(ctx context.Context, older, reachable time.Duration) (int, error) {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	if older > 0 {
		return s.cat.Reap(ctx, older)
	}
	reach := s.feed.reachableFor()
	if reachable >= 0 {
		reach = min(reach, reachable)
	}
	if time.Since(s.reaped) < reapCoalesce && reach <= s.reach {
		return 0, nil
	}
	n, err := switchboard.ReapGrace(ctx, s.cat, reach)
	if err == nil {
		s.reaped, s.reach = time.Now(), reach
	}
	return n, err
}

// New returns a server over cat and starts its mirror of the catalog (one
// Watch shared by every SSE subscriber), its heartbeat batcher and, unless
// disabled, its reaper.
func New(cat switchboard.Catalog, opts Options) *Server {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cat: cat, opts: opts, log: opts.Logger, cancel: cancel, stop: make(chan struct{})}
	s.metrics = newServerMetrics(s)
	s.cop = http.NewCrossOriginProtection()
	for _, t := range append([]string{opts.Token}, opts.Tokens...) {
		if t != "" {
			s.tokens = append(s.tokens, t)
		}
	}
	s.tags = newTokenTags(s.tokens)
	s.streams = &streamQuota{max: opts.MaxWatchers, perClient: opts.MaxWatchersPerClient, perToken: opts.MaxWatchersPerToken,
		by: map[string]int{}, byCred: map[string]int{}}
	s.feed = newFeed(opts.Logger, opts.History, opts.HistoryBytes, s.metrics.observe)
	s.beats = newBatcher(cat, opts.HeartbeatWindow, s.metrics.batches.Inc, opts.Logger, s.stop)
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.feed.run(ctx, cat) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.beats.run(ctx) }()
	if opts.ReapInterval > 0 {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.reaper(ctx) }()
	}
	s.routes()
	return s
}

// Close stops the server's background work and ends its watch streams. It
// is idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.stop)
		s.cancel()
		s.wg.Wait()
	})
	return nil
}

type handler func(w http.ResponseWriter, r *http.Request) error

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	allowed := map[string][]string{} // path -> methods, for 405 answers
	var paths []string
	api := func(pattern, route string, h handler) {
		s.mux.Handle(pattern, s.instrument(route, s.authorize(h)))
		method, path, _ := strings.Cut(pattern, " ")
		if allowed[path] == nil {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], method)
	}
	api("GET /v1/instances", "list", s.handleList)
	api("PUT /v1/instances", "register", s.handleRegister)
	api("GET /v1/instances/{id}", "get", s.handleGet)
	api("DELETE /v1/instances/{id}", "deregister", s.handleDeregister)
	api("PUT /v1/instances/{id}/heartbeat", "heartbeat", s.handleHeartbeat)
	api("POST /v1/instances/{id}/drain", "drain", s.handleDrain(true))
	api("DELETE /v1/instances/{id}/drain", "undrain", s.handleDrain(false))
	api("POST /v1/heartbeats", "heartbeats", s.handleHeartbeats)
	api("POST /v1/reap", "reap", s.handleReap)
	api("GET /v1/watch", "watch", s.handleWatch)
	api("GET /v1/now", "now", s.handleNow)
	api("GET /v1/info", "info", s.handleInfo)
	api("GET /v1/leases", "leases", s.handleLeases)
	api("POST /v1/leases/acquire", "lease_acquire", s.handleAcquire)
	api("POST /v1/leases/renew", "lease_renew", s.handleRenew)
	api("POST /v1/leases/release", "lease_release", s.handleRelease)
	for _, path := range paths {
		s.mux.Handle(path, s.instrument("unknown", s.authorize(methodNotAllowed(strings.Join(allowed[path], ", ")))))
	}
	s.mux.Handle("/v1/", s.instrument("unknown", s.authorize(func(w http.ResponseWriter, r *http.Request) error {
		return &apiError{status: http.StatusNotFound, body: ErrorBody{Error: "no such endpoint: " + r.Method + " " + r.URL.Path, Code: CodeNotFound}}
	})))
	s.mux.Handle("GET /healthz", s.instrument("healthz", s.handleHealthz))
	// The API's description is public, as /healthz is: it holds no data.
	s.mux.Handle("GET /v1/openapi.json", s.instrument("openapi", s.handleOpenAPI))
	s.mux.Handle("GET /metrics", s.instrument("metrics", s.authorize(s.metrics.handle)))
	// Their other methods get the API's JSON 405, not the mux's text one
	// (nor, with a UI at /, the UI's).
	s.mux.Handle("/healthz", s.instrument("unknown", methodNotAllowed("GET, HEAD")))
	s.mux.Handle("/metrics", s.instrument("unknown", s.authorize(methodNotAllowed("GET, HEAD"))))
	s.mux.Handle("/v1/openapi.json", s.instrument("unknown", methodNotAllowed("GET, HEAD")))
	if s.opts.UI != nil {
		s.mux.Handle("/", s.opts.UI)
	}
}

// methodNotAllowed answers 405 with the methods a path takes.
func methodNotAllowed(methods string) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Allow", methods)
		return &apiError{status: http.StatusMethodNotAllowed, body: ErrorBody{Error: r.Method + " " + r.URL.Path + ": method not allowed (allowed: " + methods + ")", Code: CodeMethod}}
	}
}

// ServeHTTP implements http.Handler. What guard refuses reaches no route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.guard(r); err != nil {
		status, body := classify(err)
		s.audit(r, slog.LevelWarn, "audit: request refused", slog.Int("status", status), slog.String("host", r.Host),
			slog.String("origin", r.Header.Get("Origin")), slog.String("error", body.Error))
		s.metrics.request("refused", writeError(w, err))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// statusWriter records the status a handler wrote, and bounds the
// writing of the response: a client that does not read its answer (a
// large list) is disconnected WriteTimeout after the answer began, rather
// than holding its handler and the encoded answer for ever (the HTTP
// server cannot set a WriteTimeout of its own: it would end every SSE
// stream, whose writes each renew the deadline).
type statusWriter struct {
	http.ResponseWriter
	status  int
	timeout time.Duration
}

func (w *statusWriter) begin(code int) {
	w.status = code
	http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.begin(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.begin(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flush, write
// deadlines) through the wrapper.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument limits the body, turns a handler's error into its JSON
// response, and counts the request by route and status.
func (s *Server) instrument(route string, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		sw := &statusWriter{ResponseWriter: w, timeout: s.opts.WriteTimeout}
		if err := h(sw, r); err != nil {
			if sw.status == 0 {
				writeError(sw, err)
			}
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.metrics.request(route, sw.status)
	})
}

// reaper deletes rows stale for twice their TTL, every ReapInterval, while
// the catalog is reachable.
func (s *Server) reaper(ctx context.Context) {
	t := time.NewTicker(s.opts.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, healthy, _ := s.feed.health(); !healthy {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := s.reap(rctx, 0, -1)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("reap failed", "err", err)
		case n > 0:
			s.log.Info("reaped stale registrations", "rows", n)
		}
	}
}
